// Reductions over a strided input: M outputs, each over K elements, in one of two shapes:
//   reduce_serial: one work-item per output walks its K elements (many outputs, or short rows);
//   reduce_group:  a work-group of WG items per (output, chunk) with a tree in local memory;
//                  with P > 1 chunks per output it writes partials that a second pass reduces.
// Both orders are fixed by the shapes alone, so results are bitwise the same run to run.
// #defines: T (input, read by LD_T: a half is read as a float), TA (accumulator/output), FLOAT_ACC, REDUCE (one of R_SUM, R_MAX,
//   R_MIN, R_ARGMAX), NOUT / NRED (collapsed kept / reduced dims), WG, INDEXED (the input
//   carries int64 indices: the second pass of argmax), IDENTITY, CONTIG (one reduced dim of
//   stride 1: rows contiguous in memory).
// Layout: v[0] = M, v[1] = K, v[2] = input offset, v[3] = chunk, v[4] = P, then the kept
// shape[NOUT] and strides[NOUT], then the reduced shape[NRED] and strides[NRED].

#define R_SUM 0
#define R_MAX 1
#define R_MIN 2
#define R_ARGMAX 3

#if FLOAT_ACC
#define ISNAN(x) ((x) != (x))  // as isnan(), but PoCL vectorizes it
#else
#define ISNAN(x) 0
#endif

#define KEPT_SHAPE(d) L.v[5 + (d)]
#define KEPT_STRIDE(d) L.v[5 + NOUT + (d)]
#define RED_SHAPE(d) L.v[5 + 2 * NOUT + (d)]
#define RED_STRIDE(d) L.v[5 + 2 * NOUT + NRED + (d)]

typedef struct {
    TA v;     // running value
    TA c;     // Neumaier compensation of a float sum
    long i;   // max/min/argmax: the index of the element that `v` came from
} acc_t;

inline acc_t acc_init(void)
{
    acc_t a;
    a.v = IDENTITY;
    a.c = 0;
    a.i = REDUCE == R_ARGMAX ? LONG_MAX : -1;
    return a;
}

// NaN beats everything (NumPy's max, min and argmax propagate or pick it)
// (integer and bool types have no NaN: no constant operands, so compilers stay quiet)
#if FLOAT_ACC && REDUCE == R_MIN
inline int better(TA x, TA best) { return x < best || (ISNAN(x) && !ISNAN(best)); }
#elif FLOAT_ACC
inline int better(TA x, TA best) { return x > best || (ISNAN(x) && !ISNAN(best)); }
#elif REDUCE == R_MIN
inline int better(TA x, TA best) { return x < best; }
#else
inline int better(TA x, TA best) { return x > best; }
#endif
#if FLOAT_ACC
inline int same(TA x, TA best) { return x == best || (ISNAN(x) && ISNAN(best)); }
#else
inline int same(TA x, TA best) { return x == best; }
#endif

inline void acc_push(acc_t* a, TA x, long i)
{
#if REDUCE == R_SUM && FLOAT_ACC
    // Neumaier's compensated sum: a float32 row of any length stays within a few ulp
    // (a select, not a branch: the sign of the comparison is data-dependent)
    const TA t = a->v + x;
    const TA big = fabs(a->v) >= fabs(x) ? a->v : x;
    const TA small = fabs(a->v) >= fabs(x) ? x : a->v;
    a->c += (big - t) + small;
    a->v = t;
#elif REDUCE == R_SUM
    a->v += x;
#elif REDUCE == R_ARGMAX
    // ties go to the lower index (the first maximum)
    if (better(x, a->v) || (same(x, a->v) && i < a->i)) {
        a->v = x;
        a->i = i;
    }
#else
    // ties (0.0 and -0.0) go to the higher index: NumPy's left fold keeps the last one, and
    // an order-free rule gives the same bits whatever shape the reduction tree has
    if (better(x, a->v) || (same(x, a->v) && i > a->i)) {
        a->v = x;
        a->i = i;
    }
#endif
}

inline void acc_merge(acc_t* a, const acc_t b)
{
#if REDUCE == R_SUM
    acc_push(a, b.v, 0);
    a->c += b.c;
#else
    acc_push(a, b.v, b.i);
#endif
}

inline TA acc_value(const acc_t a)
{
#if REDUCE == R_SUM && FLOAT_ACC
    // an infinite sum leaves a NaN compensation behind: the plain sum is the answer then
    return isfinite(a.c) ? a.v + a.c : a.v;
#else
    return a.v;
#endif
}

// the input offset of output m's first element
inline IDX kept_offset(const layout_t L, IDX m)
{
    IDX o = L.v[2];
#if NOUT > 0
    for (int d = NOUT - 1; d >= 0; --d) {
        const IDX n = KEPT_SHAPE(d);
        o += (m % n) * KEPT_STRIDE(d);
        m /= n;
    }
#endif
    return o;
}

// the offset of reduced element k from its output's first element
inline IDX reduced_offset(const layout_t L, IDX k)
{
#if NRED == 1
    return k * RED_STRIDE(0);
#else
    IDX o = 0;
    for (int d = NRED - 1; d >= 0; --d) {
        const IDX n = RED_SHAPE(d);
        o += (k % n) * RED_STRIDE(d);
        k /= n;
    }
    return o;
#endif
}

#if INDEXED
#define INDEX_OF(o, k) x_index[o]
#else
#define INDEX_OF(o, k) (k)
#endif

// A float sum adds runs of 8 elements plainly and each run into the compensated total: the
// compensation costs several flops, paid once per 8 elements it keeps CPUs memory-bound,
// and a run of 8 rounds at most 7 times. Other reductions take every element as it comes.
#if REDUCE == R_SUM && FLOAT_ACC
#define FEED_BEGIN TA run = 0; int filled = 0;
#define FEED(value, index) { run += (value); \
                             if (++filled == 8) { acc_push(&a, run, 0); run = 0; filled = 0; } }
#define FEED_END acc_push(&a, run, 0);
#else
#define FEED_BEGIN
#define FEED(value, index) acc_push(&a, value, index);
#define FEED_END
#endif

__kernel void reduce_serial(__global TA* out, __global long* out_index,
                            __global const T* x, __global const long* x_index, const layout_t L)
{
    const IDX m = get_global_id(0);
    if (m >= L.v[0])
        return;
    const IDX K = L.v[1];
    const IDX base = kept_offset(L, m);
    acc_t a = acc_init();
    FEED_BEGIN
#if NRED == 1
    const IDX step = RED_STRIDE(0);
    IDX o = base;
    for (IDX k = 0; k < K; ++k, o += step)
        FEED((TA)LD_T(x, o), INDEX_OF(o, k))
#else
    for (IDX k = 0; k < K; ++k) {
        const IDX o = base + reduced_offset(L, k);
        FEED((TA)LD_T(x, o), INDEX_OF(o, k))
    }
#endif
    FEED_END
    out[m] = acc_value(a);
#if REDUCE == R_ARGMAX
    out_index[m] = a.i;
#endif
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void reduce_group(__global TA* out, __global long* out_index,
                  __global const T* x, __global const long* x_index, const layout_t L)
{
    __local acc_t scratch[WG];
    const IDX g = get_group_id(0);
    const IDX P = L.v[4];
    const IDX m = g / P;
    const IDX chunk = L.v[3];
    const IDX begin = (g % P) * chunk;
    const IDX end = min(L.v[1], begin + chunk);
    const int t = get_local_id(0);
    const IDX base = kept_offset(L, m);
    acc_t a = acc_init();
    FEED_BEGIN
    IDX k = begin + t;
#if CONTIG && REDUCE == R_SUM && FLOAT_ACC
    // rows contiguous in memory: 8 independent loads per step (each coalesced across the
    // group) keep enough bytes in flight to reach the memory's bandwidth on a GPU; they are
    // added as a tree (a short dependency chain for CPUs), then into the compensated total
    for (; k + 7 * WG < end; k += 8 * WG) {
        __global const T* p = x + base + k;
        const TA v0 = LD_T(p, 0), v1 = LD_T(p, WG), v2 = LD_T(p, 2 * WG);
        const TA v3 = LD_T(p, 3 * WG), v4 = LD_T(p, 4 * WG), v5 = LD_T(p, 5 * WG);
        const TA v6 = LD_T(p, 6 * WG), v7 = LD_T(p, 7 * WG);
        acc_push(&a, ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)), 0);
    }
#endif
    for (; k < end; k += WG) {
#if CONTIG
        const IDX o = base + k;
#else
        const IDX o = base + reduced_offset(L, k);
#endif
        FEED((TA)LD_T(x, o), INDEX_OF(o, k))
    }
    FEED_END
    scratch[t] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = WG / 2; width > 0; width >>= 1) {
        if (t < width) {
            acc_t mine = scratch[t];
            acc_merge(&mine, scratch[t + width]);
            scratch[t] = mine;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) {
        out[g] = acc_value(scratch[0]);
#if REDUCE == R_ARGMAX
        out_index[g] = scratch[0].i;
#endif
    }
}
