// Column sums of a C-contiguous (R, D) array -- a sum over its leading axes, such as a bias
// gradient over (batch, time) -- in a fixed order and in double: the rows are cut into blocks
// of rows_per; ndl_column_partial adds each block's rows in ascending order (a thread per
// (block, column): neighbouring threads read neighbouring columns), ndl_column_finish adds each
// column's blocks in ascending order and rounds once. No atomics: the same bits run to run.
// CuPy's own axis-0 reduction gives each output a thread walking all R rows, slow for R of
// tens of thousands.

template <typename T, typename I>
__global__ void ndl_column_partial(const T* x, double* partial, I R, I D, I rows_per,
                                   I blocks) {
  const I total = blocks * D;
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    const I q = e / D, d = e - q * D;
    const I end = (q + 1) * rows_per < R ? (q + 1) * rows_per : R;
    double acc = 0.0;
    for (I r = q * rows_per; r < end; ++r) acc += static_cast<double>(x[r * D + d]);
    partial[e] = acc;
  }
}

// A column sum in one launch for few rows (the caller's bound): a thread per column adds its
// R values in order, in double, and rounds once.
template <typename T, typename I>
__global__ void ndl_column_direct(const T* x, T* out, I R, I D) {
  for (I d = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; d < D;
       d += static_cast<I>(gridDim.x) * blockDim.x) {
    double acc = 0.0;
    for (I r = 0; r < R; ++r) acc += static_cast<double>(x[r * D + d]);
    out[d] = static_cast<T>(acc);
  }
}

template <typename T, typename I>
__global__ void ndl_column_finish(const double* partial, T* out, I blocks, I D) {
  for (I d = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; d < D;
       d += static_cast<I>(gridDim.x) * blockDim.x) {
    double acc = 0.0;
    for (I q = 0; q < blocks; ++q) acc += partial[q * D + d];
    out[d] = static_cast<T>(acc);
  }
}

// Channel sums of a C-contiguous (N, C, S) array -- the sum over every axis but 1, a conv
// layer's bias gradient -- in double: block blk = q * C + c sums chunk q (`per` values of
// the N * S) of channel c, its threads striding along the contiguous runs, then a tree in
// shared memory in a fixed order; ndl_column_finish adds each channel's chunks in order
// (partial is (chunks, C)). No atomics: the same bits run to run.
// (O: double for the partial sums; T when one chunk covers a channel, its sum rounded once
// and written as the result, the same bits as a finish over one chunk.)
template <typename T, typename I, typename O>
__device__ void ndl_channel_chunks(const T* x, O* partial, I N, I C, I S, I per, I chunks) {
  __shared__ double part[256];
  const I total = N * S;
  for (I blk = blockIdx.x; blk < chunks * C; blk += gridDim.x) {
    const I q = blk / C, c = blk - q * C;
    const I end = (q + 1) * per < total ? (q + 1) * per : total;
    double acc = 0.0;
    for (I j = q * per + static_cast<I>(threadIdx.x); j < end; j += blockDim.x) {
      const I n = j / S;
      acc += static_cast<double>(x[(n * C + c) * S + (j - n * S)]);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
      if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) partial[blk] = static_cast<O>(part[0]);
    __syncthreads();
  }
}

template <typename T, typename I>
__global__ void ndl_channel_partial(const T* x, double* partial, I N, I C, I S, I per,
                                    I chunks) {
  ndl_channel_chunks<T, I, double>(x, partial, N, C, S, per, chunks);
}

template <typename T, typename I>
__global__ void ndl_channel_direct(const T* x, T* out, I N, I C, I S, I per) {
  ndl_channel_chunks<T, I, T>(x, out, N, C, S, per, static_cast<I>(1));
}

// Row sums of a C-contiguous (R, D) array -- a sum over its trailing axes, such as softmax's
// and log_softmax's backward over the classes -- in double, a thread per row adding its D
// values in order: for short rows only (the caller's bound), one launch.
template <typename T, typename I>
__global__ void ndl_row_sum(const T* x, T* out, I R, I D) {
  for (I r = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; r < R;
       r += static_cast<I>(gridDim.x) * blockDim.x) {
    double acc = 0.0;
    for (I d = 0; d < D; ++d) acc += static_cast<double>(x[r * D + d]);
    out[r] = static_cast<T>(acc);
  }
}
