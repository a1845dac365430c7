// max and min reductions with NumPy's choice between equal values. They differ only in the
// sign of a zero: NumPy folds `acc = maximum(acc, x)`, and maximum returns its second operand
// on a tie, so the LAST of the maximal elements (in row-major order) is the result -- +0.0 for
// [-0.0, 0.0] but -0.0 for [0.0, -0.0]. CuPy's reduction picks whichever its tree meets first.
// Carrying each candidate's position makes "the last extremal element" an associative and
// commutative choice, so any reduction tree gives it. A NaN wins (the first NaN).
// (NumPy's SIMD loops, on long contiguous rows, break such ties their own machine-dependent
// way; no order-free rule can follow those.)

template <typename T>
struct ndl_extremum {
  T value;
  long long index;  // row-major position among the reduced elements; -1: none yet (identity)
  __device__ ndl_extremum() : value(), index(-1) {}
  __device__ ndl_extremum(T v, long long i) : value(v), index(i) {}
};

template <typename T>
__device__ ndl_extremum<T> ndl_later_extremum(const ndl_extremum<T>& a,
                                              const ndl_extremum<T>& b, bool greatest) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  const ndl_extremum<T>& first = a.index < b.index ? a : b;
  const ndl_extremum<T>& last = a.index < b.index ? b : a;
  if (first.value != first.value) return first;
  if (last.value != last.value) return last;
  const bool first_wins = greatest ? first.value > last.value : first.value < last.value;
  return first_wins ? first : last;
}

template <typename T>
__device__ ndl_extremum<T> ndl_later_max(const ndl_extremum<T>& a, const ndl_extremum<T>& b) {
  return ndl_later_extremum(a, b, true);
}

template <typename T>
__device__ ndl_extremum<T> ndl_later_min(const ndl_extremum<T>& a, const ndl_extremum<T>& b) {
  return ndl_later_extremum(a, b, false);
}
