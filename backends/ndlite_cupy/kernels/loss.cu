// log_softmax and the negative log-likelihood for the CuPy backend (nn.py).
//
// log_softmax: one thread per row of L values (rows are (outer, inner) pairs around the
// axis, `inner` consecutive rows interleaved), computing the reference's formula
// (x - max) - log(sum(exp(x - max))) in three passes over its row.
//
// nll_loss: one block of NDL_NLL_THREADS threads reduces every label's loss, then the count
// of labels that are not ignore_index, with a fixed tree in shared memory: deterministic.
// Its gradient is one thread per (row, class) element. Labels are checked on the host first.

#define NDL_NLL_THREADS 256

// a * b and a - b each rounded on its own: NVRTC would contract a - b * c into a fused
// multiply-add (the host build of the tests compiles with contraction off)
#if defined(__CUDA_ARCH__)
__device__ inline float ndl_mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double ndl_mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float ndl_sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double ndl_sub_rn(double a, double b) { return __dsub_rn(a, b); }
#else
template <typename T> inline T ndl_mul_rn(T a, T b) { return a * b; }
template <typename T> inline T ndl_sub_rn(T a, T b) { return a - b; }
#endif

template <typename T, typename I>
__host__ __device__ inline void ndl_log_softmax_row(const T* x, T* out, I r, I L, I inner) {
  const I base = (r / inner) * L * inner + r % inner;
  T m = x[base];
  for (I k = 1; k < L; ++k) {
    const T v = x[base + k * inner];
    if (v > m || v != v) m = v;  // NaN propagates, as in NumPy's max
  }
  T s = T(0);
  for (I k = 0; k < L; ++k) s += exp(x[base + k * inner] - m);
  const T log_sum = log(s);
  for (I k = 0; k < L; ++k) out[base + k * inner] = (x[base + k * inner] - m) - log_sum;
}

template <typename T, typename I>
__global__ void ndl_log_softmax(const T* x, T* out, I rows, I L, I inner) {
  for (I r = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_log_softmax_row<T, I>(x, out, r, L, inner);
  }
}

// log_softmax's backward from its output y: grad - exp(y) * sum(grad) along the row, each row
// one thread, its sum in the row's order in double (the backend's sum accumulates float32 in
// double too); the fallback's exp, mul and sub per element, each rounded.
template <typename T, typename I>
__global__ void ndl_log_softmax_grad(const T* grad, const T* y, T* out, I rows, I L, I inner) {
  for (I r = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += static_cast<I>(gridDim.x) * blockDim.x) {
    const I base = (r / inner) * L * inner + r % inner;
    double s = 0.0;
    for (I k = 0; k < L; ++k) s += static_cast<double>(grad[base + k * inner]);
    const T total = static_cast<T>(s);
    for (I k = 0; k < L; ++k) {
      const I at = base + k * inner;
      out[at] = ndl_sub_rn(grad[at], ndl_mul_rn(exp(y[at]), total));
    }
  }
}

// The reference (fallbacks.nll_loss): loss_i = valid_i ? -input[i, safe_i] : 0 with safe_i the
// label or 0 when ignored, valid_i 1 or 0. reduction: 0 none (out is (N,)), 1 sum, 2 mean
// (sum / count). Launch with one block of NDL_NLL_THREADS threads.
template <typename T>
__global__ void ndl_nll_loss(const T* input, const long long* target, T* out, long long N,
                             long long C, long long ignore_index, int reduction) {
  __shared__ T loss_sums[NDL_NLL_THREADS];
  __shared__ T counts[NDL_NLL_THREADS];
  T loss_sum = T(0), count = T(0);
  for (long long i = threadIdx.x; i < N; i += blockDim.x) {
    const long long t = target[i];
    const T valid = t != ignore_index ? T(1) : T(0);
    const long long safe = t != ignore_index ? t : 0;
    const T loss = t != ignore_index ? -input[i * C + safe] : T(0);
    if (reduction == 0) out[i] = loss;
    loss_sum += loss;
    count += valid;
  }
  if (reduction == 0) return;
  loss_sums[threadIdx.x] = loss_sum;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss_sums[threadIdx.x] += loss_sums[threadIdx.x + half];
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = reduction == 1 ? loss_sums[0] : loss_sums[0] / counts[0];
}

// The count of labels that are not ignore_index, as T, into count[0] (for the gradient of a
// mean). One block of NDL_NLL_THREADS threads.
template <typename T>
__global__ void ndl_nll_count(const long long* target, T* count, long long N,
                              long long ignore_index) {
  __shared__ T counts[NDL_NLL_THREADS];
  T c = T(0);
  for (long long i = threadIdx.x; i < N; i += blockDim.x) {
    c += target[i] != ignore_index ? T(1) : T(0);
  }
  counts[threadIdx.x] = c;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) counts[threadIdx.x] += counts[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) count[0] = counts[0];
}

// grad_input[i, c] = 0 + (-g_i) at c == safe_i for a valid label, else 0: what the reference's
// chain (div, broadcast, mul, neg, scatter_add into zeros) gives, NaN and signed zeros too.
// g_i = grad_output[i] (none), grad_output[0] (sum) or grad_output[0] / count[0] (mean).
template <typename T, typename I>
__host__ __device__ inline void ndl_nll_loss_grad_at(const T* grad_output, const long long* target,
                                                     const T* count, T* grad_input, I e, I C,
                                                     long long ignore_index, int reduction) {
  const I i = e / C;
  const I c = e % C;
  const long long t = target[i];
  const long long safe = t != ignore_index ? t : 0;
  if (c != safe) {
    grad_input[e] = T(0);
    return;
  }
  if (t == ignore_index) {  // exactly 0, even where "mean" divides by a count of 0
    grad_input[e] = T(0);
    return;
  }
  const T g = reduction == 0 ? grad_output[i]
                             : (reduction == 1 ? grad_output[0] : grad_output[0] / count[0]);
  grad_input[e] = T(0) + -g;
}

template <typename T, typename I>
__global__ void ndl_nll_loss_grad(const T* grad_output, const long long* target, const T* count,
                                  T* grad_input, I total, I C, long long ignore_index,
                                  int reduction) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_nll_loss_grad_at<T, I>(grad_output, target, count, grad_input, e, C, ignore_index,
                               reduction);
  }
}
