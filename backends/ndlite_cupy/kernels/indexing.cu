// Indexing device functions of the CuPy backend: gather, scatter_add and put.
//
// No atomics: every output element is computed by one thread, which reads its contributions
// in a fixed order (ascending position along the indexed axis), so results are bitwise
// identical run to run -- and equal to NumPy's `add.at`, which adds in the same order.
//
// Shapes are seen as (P, S, Q) around the indexed axis: P is the product of the dims before
// it, S its length, Q the product of the dims after it. `i` is the row-major index of the
// thread's output element. Raw arrays (CuPy's CArray) are indexed by their row-major logical
// index, whatever their strides, so views and broadcast indices need no copy.

// gather: out[p, j, q] = x[p, idx, q], where idx = index[p, j, q] (already in range) and the
// output is (P, J, Q).
template <typename T, typename X>
__device__ T ndl_gather(const X& x, long long idx, ptrdiff_t i, ptrdiff_t J, ptrdiff_t S,
                        ptrdiff_t Q) {
  const ptrdiff_t q = i % Q;
  const ptrdiff_t p = i / (J * Q);
  return x[(p * S + idx) * Q + q];
}

// scatter_add, direct: out[p, s, q] = sum over j = 0 .. J-1 (in order) of values[p, j, q]
// where index[p, j, q] == s. Each thread scans its J candidates: the path for short axes.
template <typename T, typename V, typename I>
__device__ T ndl_scatter_add_direct(const V& values, const I& index, ptrdiff_t i, ptrdiff_t J,
                                    ptrdiff_t S, ptrdiff_t Q) {
  const ptrdiff_t q = i % Q;
  const ptrdiff_t s = (i / Q) % S;
  const ptrdiff_t p = i / (S * Q);
  T acc = T(0);
  for (ptrdiff_t j = 0; j < J; ++j) {
    const ptrdiff_t n = (p * J + j) * Q + q;
    if (index[n] == s) {
      acc += values[n];
    }
  }
  return acc;
}

// scatter_add, sorted (long axes), step 1: the key of values[p, j, q] with s = index[p, j, q].
// Keys are unique; sorted, they group contributions by output element o = (p * S + s) * Q + q
// and order each group by j: key = o * J + j. `i` runs over values (P, J, Q).
__device__ long long ndl_scatter_key(long long s, ptrdiff_t i, ptrdiff_t J, ptrdiff_t S,
                                     ptrdiff_t Q) {
  const ptrdiff_t q = i % Q;
  const ptrdiff_t j = (i / Q) % J;
  const ptrdiff_t p = i / (J * Q);
  return ((p * S + s) * Q + q) * J + j;
}

// step 2: output element o sums its run of sorted keys, keys[starts[o] .. starts[o + 1]),
// in order (starts[o] is the first key >= o * J).
template <typename T, typename K, typename B, typename V>
__device__ T ndl_scatter_add_sorted(const K& keys, const B& starts, const V& values,
                                    ptrdiff_t i, ptrdiff_t J, ptrdiff_t S, ptrdiff_t Q) {
  const ptrdiff_t q = i % Q;
  const ptrdiff_t p = i / (S * Q);
  T acc = T(0);
  const long long end = starts[i + 1];
  for (long long r = starts[i]; r < end; ++r) {
    const ptrdiff_t j = keys[r] - i * J;
    acc += values[(p * J + j) * Q + q];
  }
  return acc;
}

// put, step 1: key = position * n + k for the k-th write (n writes in all); sorted, the last
// key of each run of equal positions belongs to the last write there.
__device__ long long ndl_put_key(long long position, ptrdiff_t k, ptrdiff_t n) {
  return position * n + k;
}

// put, step 2 (thread r of n, over the sorted keys): only the last write of each position
// stores, so "the last write wins" as in NumPy, and no two threads write one element.
template <typename K, typename V, typename D>
__device__ void ndl_put_last(const K& keys, const V& values, D& dst, ptrdiff_t r, ptrdiff_t n) {
  const long long key = keys[r];
  const long long position = key / n;
  if (r + 1 == n || keys[r + 1] / n != position) {
    dst[position] = values[key % n];
  }
}
