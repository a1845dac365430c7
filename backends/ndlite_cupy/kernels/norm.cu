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
//   ndl_bn_normalize: grid-stride, y = (x - mean) * invstd * weight + bias;
//   ndl_bn_chunk_grad: per (c, k) as ndl_bn_chunk_stats, the sums of grad and grad * xhat;
//   ndl_bn_grad_sums: a thread per channel, the chunks' sums in ascending k;
//   ndl_bn_grad_input: grid-stride, grad_x = ((grad - sum_dy / M) - xhat * sum_dy_xhat / M) *
//     (invstd * weight).
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

// the offset of element e = n * S + s of channel c
template <typename I>
__device__ inline I ndl_bn_at(I e, I c, I C, I S) {
  const I n = e / S;
  return (n * C + c) * S + (e - n * S);
}

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
    T s = T(0);
    for (I e = start + threadIdx.x; e < end; e += blockDim.x) s += x[ndl_bn_at(e, c, C, S)];
    const T mu = ndl_bn_block_sum(s, scratch) / static_cast<T>(end - start);
    T m2 = T(0);
    for (I e = start + threadIdx.x; e < end; e += blockDim.x) {
      const T d = x[ndl_bn_at(e, c, C, S)] - mu;
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

template <typename T, typename I>
__global__ void ndl_bn_normalize(const T* x, const T* mean, const T* invstd, const T* weight,
                                 const T* bias, T* y, I total, I C, I S) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I c = i / S % C;
    T v = (x[i] - mean[c]) * invstd[c];
    if (weight) v = v * weight[c];
    if (bias) v = v + bias[c];
    y[i] = v;
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
    T s1 = T(0), s2 = T(0);
    for (I e = start + threadIdx.x; e < end; e += blockDim.x) {
      const I at = ndl_bn_at(e, c, C, S);
      const T g = grad[at];
      s1 += g;
      s2 += g * ((x[at] - mu) * rs);
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
                                  T* grad_x, I total, I C, I S, I M) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I c = i / S % C;
    const T rs = invstd[c];
    const T xhat = (x[i] - mean[c]) * rs;
    const T inner = (grad[i] - sum_dy[c] / static_cast<T>(M)) -
                    xhat * (sum_dy_xhat[c] / static_cast<T>(M));
    grad_x[i] = inner * (weight ? rs * weight[c] : rs);
  }
}
