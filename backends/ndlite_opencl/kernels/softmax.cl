// log_softmax along one axis of a row-major x seen as (outer, L, inner): each row is L
// elements `inner` apart, out = x - max - log(sum(exp(x - max))), the fallback's formula.
//   log_softmax_rows:  one work-item per row (many rows, or short ones);
//   log_softmax_group: a work-group of WG per row (few long rows), a tree in local memory.
// Sums of exp are compensated (Neumaier): a long row stays within a few ulp. Fixed orders:
// bitwise the same run to run.
// #defines: T (arithmetic), P (the buffers' element type, read by LD_P and written by ST_P: a
// half is computed in float, the result rounded once), WG. Layout: rows, L, inner.

typedef struct { T s; T c; } sum_t;

inline void sum_add(sum_t* a, const T x)
{
    const T t = a->s + x;
    a->c += fabs(a->s) >= fabs(x) ? (a->s - t) + x : (x - t) + a->s;
    a->s = t;
}

// NaN propagates through the max as through the fallback's max reduction
inline T max_(const T a, const T b) { return (a > b || a != a) ? a : b; }

__kernel void log_softmax_rows(__global P* out, __global const P* x, const layout_t L)
{
    const int r = get_global_id(0);
    if (r >= L.v[0])
        return;
    const int len = L.v[1], inner = L.v[2];
    const int base = (r / inner) * len * inner + r % inner;
    T m = -INFINITY;
    for (int k = 0; k < len; ++k)
        m = max_(m, LD_P(x, base + k * inner));
    sum_t s = {0, 0};
    for (int k = 0; k < len; ++k)
        sum_add(&s, exp(LD_P(x, base + k * inner) - m));
    const T lse = log(s.s + s.c);
    for (int k = 0; k < len; ++k)
        ST_P(out, base + k * inner, (LD_P(x, base + k * inner) - m) - lse);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void log_softmax_group(__global P* out, __global const P* x, const layout_t L)
{
    __local T scratch[2 * WG];
    const int r = get_group_id(0), t = get_local_id(0);
    const int len = L.v[1], inner = L.v[2];
    const int base = (r / inner) * len * inner + r % inner;
    T m = -INFINITY;
    for (int k = t; k < len; k += WG)
        m = max_(m, LD_P(x, base + k * inner));
    scratch[t] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = WG / 2; width > 0; width >>= 1) {
        if (t < width)
            scratch[t] = max_(scratch[t], scratch[t + width]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    sum_t s = {0, 0};
    for (int k = t; k < len; k += WG)
        sum_add(&s, exp(LD_P(x, base + k * inner) - m));
    scratch[2 * t] = s.s;
    scratch[2 * t + 1] = s.c;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = WG / 2; width > 0; width >>= 1) {
        if (t < width) {
            sum_t a = {scratch[2 * t], scratch[2 * t + 1]};
            sum_add(&a, scratch[2 * (t + width)]);
            a.c += scratch[2 * (t + width) + 1];
            scratch[2 * t] = a.s;
            scratch[2 * t + 1] = a.c;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const T lse = log(scratch[0] + scratch[1]);
    for (int k = t; k < len; k += WG)
        ST_P(out, base + k * inner, (LD_P(x, base + k * inner) - m) - lse);
}

// log_softmax's backward from its output y: grad - exp(y) * sum(grad) along the row, one
// work-item per row, the row's sum compensated; exp, product and difference each rounded.
__kernel void log_softmax_grad_rows(__global P* out, __global const P* grad, __global const P* y,
                                    const layout_t L)
{
#pragma OPENCL FP_CONTRACT OFF
    const int r = get_global_id(0);
    if (r >= L.v[0])
        return;
    const int len = L.v[1], inner = L.v[2];
    const int base = (r / inner) * len * inner + r % inner;
    sum_t s = {0, 0};
    for (int k = 0; k < len; ++k)
        sum_add(&s, LD_P(grad, base + k * inner));
    const T total = s.s + s.c;
    for (int k = 0; k < len; ++k) {
        const int at = base + k * inner;
        const T scaled = exp(LD_P(y, at)) * total;
        ST_P(out, at, LD_P(grad, at) - scaled);
    }
}
