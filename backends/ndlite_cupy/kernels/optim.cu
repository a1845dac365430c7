// Fused optimizer steps for the CuPy backend (optim.py): one kernel per parameter updates the
// parameter and its state buffers in place, elementwise.
//
// Each step performs the reference's operations (fallbacks.py) in the same order, each one
// rounded on its own: the _rn intrinsics keep the compiler from contracting a * b + c into
// one fused multiply-add, so results equal the NumPy reference bit for bit (+, -, *, / and
// sqrt are correctly rounded in CUDA without fast math). Hyperparameters arrive as doubles
// and are rounded to T where used, as NumPy rounds a Python float next to a float32 array.
//
// `table`: during CUDA graph capture the hyperparameters are read from device memory
// (table[0], table[1], ...) instead of the arguments, so that each replay can bring new ones (a learning
// rate schedule, Adam's bias corrections); otherwise it is null.

#ifdef __CUDA_ARCH__
__device__ inline float ndl_add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float ndl_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float ndl_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float ndl_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline float ndl_sqrt(float a) { return __fsqrt_rn(a); }
__device__ inline double ndl_add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double ndl_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline double ndl_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double ndl_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline double ndl_sqrt(double a) { return __dsqrt_rn(a); }
#else
template <typename T> inline T ndl_add(T a, T b) { return a + b; }
template <typename T> inline T ndl_sub(T a, T b) { return a - b; }
template <typename T> inline T ndl_mul(T a, T b) { return a * b; }
template <typename T> inline T ndl_div(T a, T b) { return a / b; }
template <typename T> inline T ndl_sqrt(T a) { return std::sqrt(a); }
#endif

// NumPy's maximum: a NaN in `a` wins, a tie gives `b`.
template <typename T>
__host__ __device__ inline T ndl_np_maximum(T a, T b) {
  return (a > b || a != a) ? a : b;
}

__host__ __device__ inline void ndl_hyper(const double* table, double* h, int count) {
  if (table != nullptr) {
    for (int k = 0; k < count; ++k) h[k] = table[k];
  }
}

// SGD. h: lr, weight_decay, momentum, 1 - dampening, nesterov, first_step.
template <typename T>
__host__ __device__ inline void ndl_sgd_at(T* param, const T* grad, T* buf, const double* h,
                                           long long k) {
  const T lr = T(h[0]), weight_decay = T(h[1]), momentum = T(h[2]), keep = T(h[3]);
  const T p = param[k];
  T g = grad[k];
  if (h[1] != 0.0) g = ndl_add(g, ndl_mul(p, weight_decay));
  if (h[2] != 0.0 && buf != nullptr) {
    const T b = h[5] != 0.0 ? g : ndl_add(ndl_mul(buf[k], momentum), ndl_mul(g, keep));
    buf[k] = b;
    g = h[4] != 0.0 ? ndl_add(g, ndl_mul(b, momentum)) : b;
  }
  param[k] = ndl_sub(p, ndl_mul(g, lr));
}

template <typename T>
__global__ void ndl_sgd_step(T* param, const T* grad, T* buf, const double* table, double h0,
                             double h1, double h2, double h3, double h4, double h5,
                             long long n) {
  double h[6] = {h0, h1, h2, h3, h4, h5};
  ndl_hyper(table, h, 6);
  for (long long k = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<long long>(gridDim.x) * blockDim.x) {
    ndl_sgd_at<T>(param, grad, buf, h, k);
  }
}

// RMSprop. h: lr, alpha, 1 - alpha, eps, momentum, weight_decay.
template <typename T>
__host__ __device__ inline void ndl_rmsprop_at(T* param, const T* grad, T* square_avg,
                                               T* grad_avg, T* buf, const double* h,
                                               long long k) {
  const T lr = T(h[0]), alpha = T(h[1]), rest = T(h[2]), eps = T(h[3]), momentum = T(h[4]);
  const T p = param[k];
  T g = grad[k];
  if (h[5] != 0.0) g = ndl_add(g, ndl_mul(p, T(h[5])));
  const T v = ndl_add(ndl_mul(square_avg[k], alpha), ndl_mul(ndl_mul(g, g), rest));
  square_avg[k] = v;
  T avg;
  if (grad_avg != nullptr) {
    const T a = ndl_add(ndl_mul(grad_avg[k], alpha), ndl_mul(g, rest));
    grad_avg[k] = a;
    avg = ndl_add(ndl_sqrt(ndl_sub(v, ndl_mul(a, a))), eps);
  } else {
    avg = ndl_add(ndl_sqrt(v), eps);
  }
  if (buf != nullptr) {
    const T b = ndl_add(ndl_mul(buf[k], momentum), ndl_div(g, avg));
    buf[k] = b;
    param[k] = ndl_sub(p, ndl_mul(b, lr));
  } else {
    param[k] = ndl_sub(p, ndl_mul(ndl_div(g, avg), lr));
  }
}

template <typename T>
__global__ void ndl_rmsprop_step(T* param, const T* grad, T* square_avg, T* grad_avg, T* buf,
                                 const double* table, double h0, double h1, double h2,
                                 double h3, double h4, double h5, long long n) {
  double h[6] = {h0, h1, h2, h3, h4, h5};
  ndl_hyper(table, h, 6);
  for (long long k = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<long long>(gridDim.x) * blockDim.x) {
    ndl_rmsprop_at<T>(param, grad, square_avg, grad_avg, buf, h, k);
  }
}

// Adam / AdamW. h: 1 - lr * weight_decay (decoupled), weight_decay (coupled, else 0), beta1,
// 1 - beta1, beta2, 1 - beta2, sqrt(1 - beta2^step), lr / (1 - beta1^step), eps.
// `decoupled` (AdamW with a weight decay) does not change during training.
template <typename T>
__host__ __device__ inline void ndl_adam_at(T* param, const T* grad, T* exp_avg, T* exp_avg_sq,
                                            T* max_exp_avg_sq, const double* h, bool decoupled,
                                            long long k) {
  T p = param[k];
  T g = grad[k];
  if (decoupled) {
    p = ndl_mul(p, T(h[0]));
  } else if (h[1] != 0.0) {
    g = ndl_add(g, ndl_mul(p, T(h[1])));
  }
  const T m = ndl_add(ndl_mul(exp_avg[k], T(h[2])), ndl_mul(g, T(h[3])));
  exp_avg[k] = m;
  T v = ndl_add(ndl_mul(exp_avg_sq[k], T(h[4])), ndl_mul(ndl_mul(g, g), T(h[5])));
  exp_avg_sq[k] = v;
  if (max_exp_avg_sq != nullptr) {
    v = ndl_np_maximum(max_exp_avg_sq[k], v);
    max_exp_avg_sq[k] = v;
  }
  const T denom = ndl_add(ndl_div(ndl_sqrt(v), T(h[6])), T(h[8]));
  param[k] = ndl_sub(p, ndl_mul(ndl_div(m, denom), T(h[7])));
}

template <typename T>
__global__ void ndl_adam_step(T* param, const T* grad, T* exp_avg, T* exp_avg_sq,
                              T* max_exp_avg_sq, const double* table, double h0, double h1,
                              double h2, double h3, double h4, double h5, double h6, double h7,
                              double h8, bool decoupled, long long n) {
  double h[9] = {h0, h1, h2, h3, h4, h5, h6, h7, h8};
  ndl_hyper(table, h, 9);
  for (long long k = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<long long>(gridDim.x) * blockDim.x) {
    ndl_adam_at<T>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, h, decoupled, k);
  }
}

// Several parameters of one dtype in one launch (sgd_steps, rmsprop_steps, adam_steps:
// optim.py). `plan` holds, per tensor, its buffers' addresses (0 for an unused state), its
// size and (SGD) its first-step flag, FIELDS entries each; then, per block, the tensor it
// works on and the first element of its chunk of CHUNK elements. Each element gets the
// one-parameter kernels' update.
template <typename T>
__global__ void ndl_sgd_steps(const long long* plan, long long tensors, long long chunk,
                              double h0, double h1, double h2, double h3, double h4) {
  const long long* block = plan + 5 * tensors + 2 * static_cast<long long>(blockIdx.x);
  const long long* e = plan + 5 * block[0];
  T* param = reinterpret_cast<T*>(e[0]);
  const T* grad = reinterpret_cast<const T*>(e[1]);
  T* buf = reinterpret_cast<T*>(e[2]);
  const long long end = block[1] + chunk < e[3] ? block[1] + chunk : e[3];
  const double h[6] = {h0, h1, h2, h3, h4, e[4] != 0 ? 1.0 : 0.0};
  for (long long k = block[1] + threadIdx.x; k < end; k += blockDim.x) {
    ndl_sgd_at<T>(param, grad, buf, h, k);
  }
}

template <typename T>
__global__ void ndl_rmsprop_steps(const long long* plan, long long tensors, long long chunk,
                                  double h0, double h1, double h2, double h3, double h4,
                                  double h5) {
  const long long* block = plan + 6 * tensors + 2 * static_cast<long long>(blockIdx.x);
  const long long* e = plan + 6 * block[0];
  const long long end = block[1] + chunk < e[5] ? block[1] + chunk : e[5];
  const double h[6] = {h0, h1, h2, h3, h4, h5};
  for (long long k = block[1] + threadIdx.x; k < end; k += blockDim.x) {
    ndl_rmsprop_at<T>(reinterpret_cast<T*>(e[0]), reinterpret_cast<const T*>(e[1]),
                      reinterpret_cast<T*>(e[2]), reinterpret_cast<T*>(e[3]),
                      reinterpret_cast<T*>(e[4]), h, k);
  }
}

// Adam / AdamW over several parameters of one step count (h as ndl_adam_step's).
template <typename T>
__global__ void ndl_adam_steps(const long long* plan, long long tensors, long long chunk,
                               double h0, double h1, double h2, double h3, double h4, double h5,
                               double h6, double h7, double h8, bool decoupled) {
  const long long* block = plan + 6 * tensors + 2 * static_cast<long long>(blockIdx.x);
  const long long* e = plan + 6 * block[0];
  const long long end = block[1] + chunk < e[5] ? block[1] + chunk : e[5];
  const double h[9] = {h0, h1, h2, h3, h4, h5, h6, h7, h8};
  for (long long k = block[1] + threadIdx.x; k < end; k += blockDim.x) {
    ndl_adam_at<T>(reinterpret_cast<T*>(e[0]), reinterpret_cast<const T*>(e[1]),
                   reinterpret_cast<T*>(e[2]), reinterpret_cast<T*>(e[3]),
                   reinterpret_cast<T*>(e[4]), h, decoupled, k);
  }
}
