// Elementwise device functions of the CuPy backend (called from ElementwiseKernels built in
// kernels.py; T is the kernel's element type). Where CuPy's own ufuncs differ from NumPy in
// the last bit, these follow NumPy: the contract asks selection ops to match the reference
// bitwise, and -0.0 and +0.0 differ there.

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
