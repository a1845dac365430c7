// The transformer fast paths of the CuPy backend (transformer.py); their specification is
// ndlite/device/transformer_fallbacks.py. Every sum runs in a fixed order: no atomics, the
// same bits run to run.
//
// embedding_grad, a sorted segment sum in two grid-stride kernels (transformer.py sorts the
// positions by row once and cuts each row's run into chunks of at most a fixed length):
//   ndl_segment_chunks: partial[c, d] = sum of grad[order[p], d] over chunk c's positions p,
//                       in ascending p (one thread per (chunk, column));
//   ndl_segment_rows:   out[r, d] = sum of partial[c, d] over row r's chunks, ascending c
//                       (one thread per (row, column); 0 for a row no index names).
// Many positions sharing a few rows run as many chunks in parallel, never one long loop.
//
// layer_norm and causal_softmax: one warp per row (a grid-stride loop over rows), its lanes
// striding over the row, reductions as a fixed butterfly of shuffles: no shared memory, no
// block barrier.
// Column sums of layer_norm's weight and bias gradients: per block of rows a partial sum in
// ascending row order (ndl_layer_norm_columns), then the partials in ascending block order
// (ndl_column_total), both grid-stride.

// A warp's sum or max of one value per lane: an xor butterfly (lanes l and l ^ o add the same
// two values, so every lane ends with the same bits), then lane 0's result for all. The row
// kernels run blocks of (32, NDL_TF_ROWS) threads: threadIdx.y picks the row, the 32 lanes
// of a warp share it. (On the CPU emulation blockDim is (1, 1): the butterflies vanish.)
#define NDL_TF_FULL 0xffffffffu

template <typename T>
__device__ inline T ndl_tf_warp_sum(T v) {
  for (int o = blockDim.x / 2; o > 0; o >>= 1) v += __shfl_xor_sync(NDL_TF_FULL, v, o);
  return __shfl_sync(NDL_TF_FULL, v, 0);
}

template <typename T>
__device__ inline T ndl_tf_max(T a, T b) { return (b > a || b != b) ? b : a; }  // NaN wins

template <typename T>
__device__ inline T ndl_tf_warp_max(T v) {
  for (int o = blockDim.x / 2; o > 0; o >>= 1)
    v = ndl_tf_max(v, __shfl_xor_sync(NDL_TF_FULL, v, o));
  return __shfl_sync(NDL_TF_FULL, v, 0);
}

// the rows of a warp: r = its first, then strides of every warp in the grid
#define NDL_TF_ROWS_LOOP(r, R) \
  for (I r = static_cast<I>(blockIdx.x) * blockDim.y + threadIdx.y; r < (R); \
       r += static_cast<I>(gridDim.x) * blockDim.y)

// ---- embedding_grad --------------------------------------------------------------------------

template <typename T, typename I>
__global__ void ndl_segment_chunks(const T* grad, const long long* order,
                                   const long long* bounds, T* partial, I chunks, I D) {
  const I total = chunks * D;
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    const I c = e / D, d = e - c * D;
    T acc = T(0);
    for (long long p = bounds[c]; p < bounds[c + 1]; ++p)
      acc += grad[static_cast<I>(order[p]) * D + d];
    partial[e] = acc;
  }
}

template <typename T, typename I>
__global__ void ndl_segment_rows(const T* partial, const long long* row_bounds, T* out,
                                 I rows, I D) {
  const I total = rows * D;
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    const I r = e / D, d = e - r * D;
    T acc = T(0);
    for (long long c = row_bounds[r]; c < row_bounds[r + 1]; ++c)
      acc += partial[static_cast<I>(c) * D + d];
    out[e] = acc;
  }
}

// ---- layer_norm ------------------------------------------------------------------------------

// y = (x - mean) * rstd * weight + bias per row of D; mean, rstd (R,) kept for the gradient.
// weight and bias may be null.
template <typename T, typename I>
__global__ void ndl_layer_norm(const T* x, const T* weight, const T* bias, T* y, T* mean,
                               T* rstd, I R, I D, T eps) {
  NDL_TF_ROWS_LOOP(r, R) {
    const T* row = x + r * D;
    T s = T(0);
    for (I j = threadIdx.x; j < D; j += blockDim.x) s += row[j];
    const T mu = ndl_tf_warp_sum(s) / static_cast<T>(D);
    T q = T(0);
    for (I j = threadIdx.x; j < D; j += blockDim.x) {
      const T c = row[j] - mu;
      q += c * c;
    }
    const T var = ndl_tf_warp_sum(q) / static_cast<T>(D);
    const T rs = T(1) / sqrt(var + eps);
    for (I j = threadIdx.x; j < D; j += blockDim.x) {
      T v = (row[j] - mu) * rs;
      if (weight) v = v * weight[j];
      if (bias) v = v + bias[j];
      y[r * D + j] = v;
    }
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = grad * weight (or grad)
template <typename T, typename I>
__global__ void ndl_layer_norm_grad(const T* grad, const T* x, const T* weight, const T* mean,
                                    const T* rstd, T* grad_x, I R, I D) {
  NDL_TF_ROWS_LOOP(r, R) {
    const T mu = mean[r], rs = rstd[r];
    T s1 = T(0), s2 = T(0);
    for (I j = threadIdx.x; j < D; j += blockDim.x) {
      const T gw = weight ? grad[r * D + j] * weight[j] : grad[r * D + j];
      s1 += gw;
      s2 += gw * ((x[r * D + j] - mu) * rs);
    }
    const T m1 = ndl_tf_warp_sum(s1) / static_cast<T>(D);
    const T m2 = ndl_tf_warp_sum(s2) / static_cast<T>(D);
    for (I j = threadIdx.x; j < D; j += blockDim.x) {
      const T gw = weight ? grad[r * D + j] * weight[j] : grad[r * D + j];
      const T xhat = (x[r * D + j] - mu) * rs;
      grad_x[r * D + j] = ((gw - m1) - xhat * m2) * rs;
    }
  }
}

// partial_w[q, d] = sum of grad * xhat, partial_b[q, d] = sum of grad, over rows
// q * rows_per .. (q + 1) * rows_per - 1 in ascending order (either output may be null)
template <typename T, typename I>
__global__ void ndl_layer_norm_columns(const T* grad, const T* x, const T* mean, const T* rstd,
                                       T* partial_w, T* partial_b, I R, I D, I rows_per,
                                       I blocks) {
  const I total = blocks * D;
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    const I q = e / D, d = e - q * D;
    const I end = (q + 1) * rows_per < R ? (q + 1) * rows_per : R;
    T sw = T(0), sb = T(0);
    for (I r = q * rows_per; r < end; ++r) {
      const T g = grad[r * D + d];
      sw += g * ((x[r * D + d] - mean[r]) * rstd[r]);
      sb += g;
    }
    if (partial_w) partial_w[e] = sw;
    if (partial_b) partial_b[e] = sb;
  }
}

// out[d] = sum of partial[q, d] over q = 0 .. blocks - 1 in ascending order
template <typename T, typename I>
__global__ void ndl_column_total(const T* partial, T* out, I blocks, I D) {
  for (I d = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; d < D;
       d += static_cast<I>(gridDim.x) * blockDim.x) {
    T acc = T(0);
    for (I q = 0; q < blocks; ++q) acc += partial[q * D + d];
    out[d] = acc;
  }
}

// ---- causal softmax --------------------------------------------------------------------------

// rows of S scores, row r being query i = r % L: out = softmax(x * scale) over keys j <= i,
// exactly 0 above the diagonal
template <typename T, typename I>
__global__ void ndl_causal_softmax(const T* x, T* out, I rows, I L, I S, T scale) {
  NDL_TF_ROWS_LOOP(r, rows) {
    const I i = r % L;
    const I keep = i + 1 < S ? i + 1 : S;
    const T* row = x + r * S;
    T m = row[0] * scale;  // key 0 is always kept: every lane starts from it
    for (I j = threadIdx.x; j < keep; j += blockDim.x) m = ndl_tf_max(m, row[j] * scale);
    m = ndl_tf_warp_max(m);
    T s = T(0);
    for (I j = threadIdx.x; j < keep; j += blockDim.x) s += exp(row[j] * scale - m);
    s = ndl_tf_warp_sum(s);
    for (I j = threadIdx.x; j < S; j += blockDim.x)
      out[r * S + j] = j < keep ? exp(row[j] * scale - m) / s : T(0);
  }
}

// grad_x = out * (grad - sum(grad * out)) * scale over each row (masked entries: out is 0)
template <typename T, typename I>
__global__ void ndl_causal_softmax_grad(const T* grad, const T* out, T* grad_x, I rows, I L,
                                        I S, T scale) {
  NDL_TF_ROWS_LOOP(r, rows) {
    const I i = r % L;
    const I keep = i + 1 < S ? i + 1 : S;
    T s = T(0);
    for (I j = threadIdx.x; j < keep; j += blockDim.x) s += grad[r * S + j] * out[r * S + j];
    s = ndl_tf_warp_sum(s);
    for (I j = threadIdx.x; j < S; j += blockDim.x)
      grad_x[r * S + j] = j < keep ? (out[r * S + j] * (grad[r * S + j] - s)) * scale : T(0);
  }
}

// ---- dropout_mask ----------------------------------------------------------------------------

// Whether element i is kept: the top 24 bits of splitmix64(seed + (i + 1) * golden) reach
// threshold (ndlite/device/transformer_fallbacks.py): one counter-based draw per element.
__device__ inline bool ndl_dropout_keep(unsigned long long seed, unsigned long long i,
                                        unsigned long long threshold) {
  unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return (z >> 40) >= threshold;
}

// out[i] = scale where element i is kept, else 0.
template <typename T, typename I>
__global__ void ndl_dropout_mask(T* out, unsigned long long seed, unsigned long long threshold,
                                 T scale, I n) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    out[i] = ndl_dropout_keep(seed, static_cast<unsigned long long>(i), threshold) ? scale
                                                                                   : T(0);
  }
}

// out[i] = x[i] * (the mask ndl_dropout_mask writes at i): dropout in one pass, no mask in
// memory; the product is the one x * mask computes (a plain rounded multiply).
template <typename T, typename I>
__global__ void ndl_dropout(const T* x, T* out, unsigned long long seed,
                            unsigned long long threshold, T scale, I n) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    out[i] = x[i] * (ndl_dropout_keep(seed, static_cast<unsigned long long>(i), threshold)
                     ? scale : T(0));
  }
}
