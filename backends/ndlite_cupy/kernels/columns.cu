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

template <typename T, typename I>
__global__ void ndl_column_finish(const double* partial, T* out, I blocks, I D) {
  for (I d = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; d < D;
       d += static_cast<I>(gridDim.x) * blockDim.x) {
    double acc = 0.0;
    for (I q = 0; q < blocks; ++q) acc += partial[q * D + d];
    out[d] = static_cast<T>(acc);
  }
}
