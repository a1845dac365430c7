// nll_loss of (N, C) log-probabilities at int64 labels, and its gradient, as the fallback
// composes them (fallbacks.py): loss_i = -x[i, label_i], or exactly 0 where label_i ==
// ignore_index (w_i, 1 or 0, is what "mean" counts).
//   nll_rows:  "none": one work-item per row;
//   nll_total: "sum" / "mean": one work-group adds the losses (and, for "mean", the w_i) in a
//              fixed order with compensation, then divides;
//   nll_grad:  one work-item per element of the (N, C) gradient: 0 + (-g_i) at
//              (i, label_i) for a valid label, 0 elsewhere (the fallback's scatter_add into zeros), g_i the
//              row's grad_output, the 0-d grad_output ("sum") or it over the count ("mean",
//              the count from nll_count first).
// #defines: T (arithmetic; the count's type), P (the tensors' element type, read by LD_P and
// written by ST_P: a half is computed in float and rounded once when stored), WG.
// Layout: N, C, 0, mean ("mean" divides), per_row (grad_output is (N,)).

typedef struct { T s; T c; } sum_t;

inline void sum_add(sum_t* a, const T x)
{
    const T t = a->s + x;
    if (isfinite(t))  // past an inf the compensation would turn it into NaN
        a->c += fabs(a->s) >= fabs(x) ? (a->s - t) + x : (x - t) + a->s;
    a->s = t;
}

inline T row_loss(__global const P* x, __global const long* target, const long ignore,
                  const int C, const int i, T* weight)
{
    const long label = target[i];
    const int valid = label != ignore;
    *weight = valid ? (T)1 : (T)0;
    return valid ? -LD_P(x, (long)i * C + label) : (T)0;
}

__kernel void nll_rows(__global P* out, __global const P* x, __global const long* target,
                       const long ignore, const layout_t L)
{
    const int i = get_global_id(0);
    if (i >= L.v[0])
        return;
    T w;
    const T loss = row_loss(x, target, ignore, L.v[1], i, &w);
    ST_P(out, i, loss);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void nll_total(__global P* out, __global const P* x, __global const long* target,
               const long ignore, const layout_t L)
{
    __local T scratch[4 * WG];
    const int t = get_local_id(0);
    sum_t loss = {0, 0}, count = {0, 0};
    for (int i = t; i < L.v[0]; i += WG) {
        T w;
        sum_add(&loss, row_loss(x, target, ignore, L.v[1], i, &w));
        sum_add(&count, w);
    }
    scratch[4 * t] = loss.s;
    scratch[4 * t + 1] = loss.c;
    scratch[4 * t + 2] = count.s;
    scratch[4 * t + 3] = count.c;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = WG / 2; width > 0; width >>= 1) {
        if (t < width) {
            for (int k = 0; k < 4; k += 2) {
                sum_t a = {scratch[4 * t + k], scratch[4 * t + k + 1]};
                sum_add(&a, scratch[4 * (t + width) + k]);
                a.c += scratch[4 * (t + width) + k + 1];
                scratch[4 * t + k] = a.s;
                scratch[4 * t + k + 1] = a.c;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) {
        const T total = scratch[0] + scratch[1];
        ST_P(out, 0, L.v[3] ? total / (scratch[2] + scratch[3]) : total);
    }
}

// the number of labels not ignored, as a float: what "mean" divides by
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void nll_count(__global T* out, __global const long* target, const long ignore,
               const layout_t L)
{
    __local T scratch[WG];
    const int t = get_local_id(0);
    T count = 0;  // exact: a float counts integers exactly far past any batch
    for (int i = t; i < L.v[0]; i += WG)
        count += target[i] != ignore ? (T)1 : (T)0;
    scratch[t] = count;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = WG / 2; width > 0; width >>= 1) {
        if (t < width)
            scratch[t] += scratch[t + width];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0)
        out[0] = scratch[0];
}

// one work-item per element of the (N, C) gradient
__kernel void nll_grad(__global P* out, __global const P* grad_output,
                       __global const long* target, __global const T* count,
                       const long ignore, const layout_t L)
{
    const int e = get_global_id(0);
    const int C = L.v[1];
    if (e >= L.v[0] * C)
        return;
    const int i = e / C, j = e % C;
    const long label = target[i];
    if (label == ignore || j != label) {  // an ignored label: exactly 0 (PyTorch)
        ST_P(out, e, (T)0);
        return;
    }
    T g = L.v[4] ? LD_P(grad_output, i) : LD_P(grad_output, 0);
    if (L.v[3])
        g = g / count[0];
    ST_P(out, e, (T)0 + (-g));
}
