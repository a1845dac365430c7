// The batch-norm fast paths of the CuPy backend (norm.py); their specification is
// ndlite/device/norm_fallbacks.py. Every sum runs in an order fixed by the shape: no atomics,
// the same bits run to run.
//
// x (N, C, S) row-major, S the trailing dims' size; channel c's M = N * S values are taken in
// the order e = n * S + s and cut into K chunks of `per` (the last shorter):
//   ndl_bn_chunk_stats: a block per (c, k) (a block-stride loop over them): the chunk's mean,
//     then the sum of squares about it (two passes over the chunk; block sums as a fixed tree
//     in shared memory);
//   ndl_bn_stats: a thread per channel combines its K chunks in ascending k (Chan's pairwise
//     update of count, mean and sum of squares): mean, var = m2 / M, invstd;
//   ndl_bn_normalize: rows of S (planes p = n * C + c) spread over blockDim.y, each row's
//     values over blockDim.x (norm.py fits the block to S): y = (x - mean) * invstd * weight
//     + bias, with no division per element;
//   ndl_bn_chunk_grad: per (c, k) as ndl_bn_chunk_stats, the sums of grad and grad * xhat;
//   ndl_bn_grad_sums: a thread per channel, the chunks' sums in ascending k;
//   ndl_bn_grad_input: as ndl_bn_normalize, grad_x = ((grad - sum_dy / M) - xhat *
//     sum_dy_xhat / M) * (invstd * weight).
// A chunk's values are walked without a division per element either: a thread's offset
// advances by a fixed jump per step, plus (C - 1) * S where its position in the plane wraps.
// weight and bias may be null. Blocks are NDL_BN_THREADS threads (a power of two); on the CPU
// emulation blockDim is 1 and the trees vanish.
#define NDL_BN_THREADS 256

template <typename T>
__device__ inline T ndl_bn_block_sum(T v, T* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (t < w) scratch[t] = scratch[t] + scratch[t + w];
    __syncthreads();
  }
  const T total = scratch[0];
  __syncthreads();
  return total;
}

// A thread's walk over a chunk of channel c: element e = n * S + s at offset (n * C + c) * S
// + s, from e = first in steps of blockDim.x (dn planes and ds values per step).
template <typename I>
struct ndl_bn_walk {
  I s, at, ds, jump, wrap, S;
  __device__ ndl_bn_walk(I first, I c, I C, I S_) : S(S_) {
    const I n = first / S, dn = static_cast<I>(blockDim.x) / S;
    s = first - n * S;
    at = (n * C + c) * S + s;
    ds = static_cast<I>(blockDim.x) - dn * S;
    jump = dn * C * S + ds;
    wrap = (C - 1) * S;
  }
  __device__ void next() {
    at += jump;
    s += ds;
    if (s >= S) {
      s -= S;
      at += wrap;
    }
  }
};

// the chunks (c, k) of a block: q = c * K + k, striding over the grid
#define NDL_BN_CHUNKS_LOOP(q, total) \
  for (I q = static_cast<I>(blockIdx.x); q < (total); q += static_cast<I>(gridDim.x))

template <typename T, typename I>
__global__ void ndl_bn_chunk_stats(const T* x, T* chunk_mean, T* chunk_m2, I N, I C, I S,
                                   I per, I K) {
  __shared__ T scratch[NDL_BN_THREADS];
  const I M = N * S;
  NDL_BN_CHUNKS_LOOP(q, C * K) {
    const I c = q / K, start = (q - c * K) * per;
    const I end = start + per < M ? start + per : M;
    const I first = start + static_cast<I>(threadIdx.x);
    T sum = T(0);
    ndl_bn_walk<I> w(first, c, C, S);
    for (I e = first; e < end; e += blockDim.x, w.next()) sum += x[w.at];
    const T mu = ndl_bn_block_sum(sum, scratch) / static_cast<T>(end - start);
    T m2 = T(0);
    ndl_bn_walk<I> v(first, c, C, S);
    for (I e = first; e < end; e += blockDim.x, v.next()) {
      const T d = x[v.at] - mu;
      m2 += d * d;
    }
    m2 = ndl_bn_block_sum(m2, scratch);
    if (threadIdx.x == 0) {
      chunk_mean[q] = mu;
      chunk_m2[q] = m2;
    }
  }
}

template <typename T, typename I>
__global__ void ndl_bn_stats(const T* chunk_mean, const T* chunk_m2, T* mean, T* invstd, T* var,
                             I M, I C, I per, I K, T eps) {
  for (I c = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; c < C;
       c += static_cast<I>(gridDim.x) * blockDim.x) {
    T n = T(0), mu = T(0), m2 = T(0);
    for (I k = 0; k < K; ++k) {
      const I size = (k + 1) * per < M ? per : M - k * per;
      const T nb = static_cast<T>(size), total = n + nb, delta = chunk_mean[c * K + k] - mu;
      mu = mu + delta * (nb / total);
      m2 = m2 + chunk_m2[c * K + k] + delta * delta * (n * nb / total);
      n = total;
    }
    const T v = m2 / static_cast<T>(M);
    mean[c] = mu;
    var[c] = v;
    invstd[c] = T(1) / sqrt(v + eps);
  }
}

// the rows (planes) of a thread: r = its first, then strides of every row of the grid
#define NDL_BN_ROWS_LOOP(r, R) \
  for (I r = static_cast<I>(blockIdx.x) * blockDim.y + threadIdx.y; r < (R); \
       r += static_cast<I>(gridDim.x) * blockDim.y)

template <typename T, typename I>
__global__ void ndl_bn_normalize(const T* x, const T* mean, const T* invstd, const T* weight,
                                 const T* bias, T* y, I planes, I C, I S) {
  NDL_BN_ROWS_LOOP(p, planes) {
    const I c = p % C;
    const T mu = mean[c], rs = invstd[c];
    for (I j = threadIdx.x; j < S; j += blockDim.x) {
      T v = (x[p * S + j] - mu) * rs;
      if (weight) v = v * weight[c];
      if (bias) v = v + bias[c];
      y[p * S + j] = v;
    }
  }
}

template <typename T, typename I>
__global__ void ndl_bn_chunk_grad(const T* grad, const T* x, const T* mean, const T* invstd,
                                  T* chunk_dy, T* chunk_dy_xhat, I N, I C, I S, I per, I K) {
  __shared__ T scratch[NDL_BN_THREADS];
  const I M = N * S;
  NDL_BN_CHUNKS_LOOP(q, C * K) {
    const I c = q / K, start = (q - c * K) * per;
    const I end = start + per < M ? start + per : M;
    const T mu = mean[c], rs = invstd[c];
    const I first = start + static_cast<I>(threadIdx.x);
    T s1 = T(0), s2 = T(0);
    ndl_bn_walk<I> w(first, c, C, S);
    for (I e = first; e < end; e += blockDim.x, w.next()) {
      const T g = grad[w.at];
      s1 += g;
      s2 += g * ((x[w.at] - mu) * rs);
    }
    s1 = ndl_bn_block_sum(s1, scratch);
    s2 = ndl_bn_block_sum(s2, scratch);
    if (threadIdx.x == 0) {
      chunk_dy[q] = s1;
      chunk_dy_xhat[q] = s2;
    }
  }
}

template <typename T, typename I>
__global__ void ndl_bn_grad_sums(const T* chunk_dy, const T* chunk_dy_xhat, T* sum_dy,
                                 T* sum_dy_xhat, I C, I K) {
  for (I c = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; c < C;
       c += static_cast<I>(gridDim.x) * blockDim.x) {
    T s1 = T(0), s2 = T(0);
    for (I k = 0; k < K; ++k) {
      s1 += chunk_dy[c * K + k];
      s2 += chunk_dy_xhat[c * K + k];
    }
    sum_dy[c] = s1;
    sum_dy_xhat[c] = s2;
  }
}

template <typename T, typename I>
__global__ void ndl_bn_grad_input(const T* grad, const T* x, const T* mean, const T* invstd,
                                  const T* weight, const T* sum_dy, const T* sum_dy_xhat,
                                  T* grad_x, I planes, I C, I S, I M) {
  NDL_BN_ROWS_LOOP(p, planes) {
    const I c = p % C;
    const T mu = mean[c], rs = invstd[c];
    const T m1 = sum_dy[c] / static_cast<T>(M), m2 = sum_dy_xhat[c] / static_cast<T>(M);
    const T scale = weight ? rs * weight[c] : rs;
    for (I j = threadIdx.x; j < S; j += blockDim.x) {
      const T xhat = (x[p * S + j] - mu) * rs;
      grad_x[p * S + j] = ((grad[p * S + j] - m1) - xhat * m2) * scale;
    }
  }
}
