// Elementwise device functions of the CuPy backend (called from ElementwiseKernels built in
// kernels.py; T is the kernel's element type). Where CuPy's own ufuncs differ from NumPy in
// the last bit, these follow NumPy: the contract asks selection ops to match the reference
// bitwise, and -0.0 and +0.0 differ there. (Arithmetic and comparisons are one-line
// expressions in kernels.py.)

// pow with NumPy's (glibc's) results where they are exact: CUDA's pow may be off by an ulp even
// for pow(x, 1.0), and gradients use x ** (n - 1) for small integer n, where the contract wants
// the reference's exact bits. Other exponents go to pow (within CUDA's stated ulps).
template <typename T>
__device__ T ndl_pow(T a, T b) {
  if (b == T(2)) return a * a;
  if (b == T(1)) return a;
  if (b == T(0)) return T(1);
  if (b == T(-1)) return T(1) / a;
  return pow(a, b);
}

// Integer powers by squaring, wrapping on overflow as NumPy's do (in unsigned arithmetic, where
// wrapping is defined; the low 32 bits are int32's answer). A negative exponent, which NumPy
// refuses, gives the truncated real result: 1 or -1 for a base of 1 or -1, else 0.
__device__ long long ndl_integer_pow(long long a, long long b) {
  if (b < 0) {
    return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  }
  unsigned long long result = 1, base = static_cast<unsigned long long>(a);
  while (b) {
    if (b & 1) result *= base;
    base *= base;
    b >>= 1;
  }
  return static_cast<long long>(result);
}
__device__ long long ndl_pow(long long a, long long b) { return ndl_integer_pow(a, b); }
__device__ int ndl_pow(int a, int b) { return static_cast<int>(ndl_integer_pow(a, b)); }
__device__ bool ndl_pow(bool a, bool b) { return a || !b; }

// NumPy's maximum(a, b): a NaN in `a` wins; otherwise `a` only when strictly greater, so a tie
// (including -0.0 against +0.0) gives `b`, and a NaN in `b` comes through as `b`.
template <typename T>
__device__ T ndl_maximum(T a, T b) {
  return (a > b || a != a) ? a : b;
}

// NumPy's minimum(a, b), with the same rules for ties and NaN.
template <typename T>
__device__ T ndl_minimum(T a, T b) {
  return (a < b || a != a) ? a : b;
}

// relu(x) = NumPy's maximum(x, 0): NaN stays NaN, -0.0 becomes +0.0, relu(0) = 0.
template <typename T>
__device__ T ndl_relu(T x) {
  return (x > T(0) || x != x) ? x : T(0);
}

// sigmoid in the form that never overflows: e = exp(-|x|) lies in (0, 1], and both branches
// are accurate in relative terms (the xp base computes the same expression in several passes).
template <typename T>
__device__ T ndl_sigmoid(T x) {
  const T e = exp(-fabs(x));
  return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

// GELU and its derivative in one pass each (the contract's fallbacks in
// ndlite/device/transformer_fallbacks.py compose them from five and eleven primitives). The
// exact form: x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, Phi' = exp(-x^2 / 2) / sqrt(2 pi);
// the tanh form as x sigmoid(2 z), z = sqrt(2 / pi) (x + 0.044715 x^3).
template <typename T>
__device__ T ndl_gelu(T x, bool tanh_form) {
  if (tanh_form) {
    const T z2 = (x + x * x * x * T(0.044715)) * T(1.5957691216057308);  // 2 sqrt(2 / pi)
    return x * ndl_sigmoid(z2);
  }
  return x * ((erf(x * T(0.7071067811865476)) + T(1)) * T(0.5));
}

template <typename T>
__device__ T ndl_gelu_grad(T g, T x, bool tanh_form) {
  if (tanh_form) {
    const T z2 = (x + x * x * x * T(0.044715)) * T(1.5957691216057308);
    const T s = ndl_sigmoid(z2), s_neg = ndl_sigmoid(-z2);
    const T d_z2 = (T(1) + x * x * T(3 * 0.044715)) * T(1.5957691216057308);
    return g * (s + x * s * s_neg * d_z2);
  }
  const T cdf = (erf(x * T(0.7071067811865476)) + T(1)) * T(0.5);
  const T pdf = exp(x * x * T(-0.5)) * T(0.3989422804014327);  // 1 / sqrt(2 pi)
  return g * (cdf + x * pdf);
}
