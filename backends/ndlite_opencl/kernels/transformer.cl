// The transformer fast paths of the OpenCL backend (transformer.py); their specification is
// ndlite/device/transformer_fallbacks.py. Every sum runs in a fixed order: no atomics, the
// same bits run to run.
//   segment_chunks, segment_rows: embedding_grad's sorted segment sum, one work-item per
//     (chunk, column), then per (row, column) over the row's chunks in order; embedding_rows:
//     its path for few rows, a work-group per (row, columns) over every position;
//   layer_norm, layer_norm_grad, causal_softmax, causal_softmax_grad: one work-group of WG
//     (a power of two; 1 on a CPU) per row, reductions as a fixed tree in local memory;
//   layer_norm_columns, column_total: the weight and bias gradients' column sums, per block
//     of rows in ascending row order, then the blocks in ascending order.
// #defines: T (arithmetic), IDX, WG, P (the element type of the tensors' buffers, read by LD_P
// and written by ST_P: a half is computed in float and rounded once when stored; partial sums
// and layer norm's mean and rstd are T, float32 for halves, as PyTorch keeps them).
// Layouts: see each kernel.

inline T max_(const T a, const T b) { return (b > a || b != b) ? b : a; }  // NaN wins

inline T group_max(T v, __local T* scratch)
{
    const int t = get_local_id(0);
    scratch[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
        if (t < w)
            scratch[t] = max_(scratch[t], scratch[t + w]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const T total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

// ---- embedding_grad (layouts: chunks, D / rows, D) -------------------------------------------

__kernel void segment_chunks(__global T* partial, __global const P* grad,
                             __global const long* order, __global const long* bounds,
                             const layout_t L)
{
    const IDX e = get_global_id(0), D = L.v[1];
    if (e >= L.v[0] * D)
        return;
    const IDX c = e / D, d = e - c * D;
    T acc = 0;
    for (long p = bounds[c]; p < bounds[c + 1]; ++p)
        acc += LD_P(grad, (IDX)order[p] * D + d);
    partial[e] = acc;
}

// embedding_grad for few rows (transformer.py's bound on rows x positions): a work-group per
// (row, block of WG columns) walks every position in ascending order, WG indices at a time
// staged in local memory, and adds the gradient rows of the positions holding its row. No
// sort and no trip through the host (the segment path reads the index back: a wait for the
// whole queue mid-step); each sum in position order, the same bits run to run.
// Layout: positions n, D, column blocks, 0.
__kernel void embedding_rows(__global P* out, __global const P* grad, __global const long* index,
                             const layout_t L)
{
    __local long staged[WG];
    const IDX n = L.v[0], D = L.v[1], t = get_local_id(0);
    const IDX r = get_group_id(0) / L.v[2], d = (get_group_id(0) % L.v[2]) * WG + t;
    T acc = 0;
    for (IDX p0 = 0; p0 < n; p0 += WG) {
        staged[t] = p0 + t < n ? index[p0 + t] : -1;
        barrier(CLK_LOCAL_MEM_FENCE);
        const IDX m = min((IDX)WG, n - p0);
        if (d < D)
            for (IDX q = 0; q < m; ++q)
                if (staged[q] == r)
                    acc += LD_P(grad, (p0 + q) * D + d);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (d < D)
        ST_P(out, r * D + d, acc);
}

__kernel void segment_rows(__global P* out, __global const T* partial,
                           __global const long* row_bounds, const layout_t L)
{
    const IDX e = get_global_id(0), D = L.v[1];
    if (e >= L.v[0] * D)
        return;
    const IDX r = e / D, d = e - r * D;
    T acc = 0;
    for (long c = row_bounds[r]; c < row_bounds[r + 1]; ++c)
        acc += partial[(IDX)c * D + d];
    ST_P(out, e, acc);
}

// ---- layer_norm (layout: R, D, rows per block, blocks) ---------------------------------------

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void layer_norm(__global P* y, __global T* mean, __global T* rstd, __global const P* x,
                __global const P* weight, __global const P* bias, const T eps, const layout_t L)
{
    __local T scratch[WG];
    const IDX r = get_group_id(0), D = L.v[1];
    const int t = get_local_id(0);
    __global const P* row = x + r * D;
    T s = 0;
    for (IDX j = t; j < D; j += WG)
        s += LD_P(row, j);
    const T mu = group_sum(s, scratch) / (T)D;
    T q = 0;
    for (IDX j = t; j < D; j += WG) {
        const T c = LD_P(row, j) - mu;
        q += c * c;
    }
    const T rs = (T)1 / sqrt(group_sum(q, scratch) / (T)D + eps);
    for (IDX j = t; j < D; j += WG) {
        T v = (LD_P(row, j) - mu) * rs;
        if (weight)
            v = v * LD_P(weight, j);
        if (bias)
            v = v + LD_P(bias, j);
        ST_P(y, r * D + j, v);
    }
    if (t == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void layer_norm_grad(__global P* grad_x, __global const P* grad, __global const P* x,
                     __global const P* weight, __global const T* mean,
                     __global const T* rstd, const layout_t L)
{
    __local T scratch[WG];
    const IDX r = get_group_id(0), D = L.v[1];
    const int t = get_local_id(0);
    const T mu = mean[r], rs = rstd[r];
    T s1 = 0, s2 = 0;
    for (IDX j = t; j < D; j += WG) {
        const T gw = weight ? LD_P(grad, r * D + j) * LD_P(weight, j) : LD_P(grad, r * D + j);
        s1 += gw;
        s2 += gw * ((LD_P(x, r * D + j) - mu) * rs);
    }
    const T m1 = group_sum(s1, scratch) / (T)D;
    const T m2 = group_sum(s2, scratch) / (T)D;
    for (IDX j = t; j < D; j += WG) {
        const T gw = weight ? LD_P(grad, r * D + j) * LD_P(weight, j) : LD_P(grad, r * D + j);
        const T xhat = (LD_P(x, r * D + j) - mu) * rs;
        ST_P(grad_x, r * D + j, ((gw - m1) - xhat * m2) * rs);
    }
}

__kernel void layer_norm_columns(__global T* partial_w, __global T* partial_b,
                                 __global const P* grad, __global const P* x,
                                 __global const T* mean, __global const T* rstd,
                                 const layout_t L)
{
    const IDX e = get_global_id(0), R = L.v[0], D = L.v[1], per = L.v[2];
    if (e >= L.v[3] * D)
        return;
    const IDX q = e / D, d = e - q * D;
    const IDX end = (q + 1) * per < R ? (q + 1) * per : R;
    T sw = 0, sb = 0;
    for (IDX r = q * per; r < end; ++r) {
        const T g = LD_P(grad, r * D + d);
        sw += g * ((LD_P(x, r * D + d) - mean[r]) * rstd[r]);
        sb += g;
    }
    if (partial_w)
        partial_w[e] = sw;
    if (partial_b)
        partial_b[e] = sb;
}

__kernel void column_total(__global P* out, __global const T* partial, const layout_t L)
{
    const IDX d = get_global_id(0), D = L.v[1];
    if (d >= D)
        return;
    T acc = 0;
    for (IDX q = 0; q < L.v[3]; ++q)
        acc += partial[q * D + d];
    ST_P(out, d, acc);
}

// ---- causal softmax (layout: rows, L, S, 0) --------------------------------------------------

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void causal_softmax(__global P* out, __global const P* x, const T scale, const layout_t L)
{
    __local T scratch[WG];
    const IDX r = get_group_id(0), S = L.v[2];
    const int t = get_local_id(0);
    const IDX i = r % L.v[1];
    const IDX keep = i + 1 < S ? i + 1 : S;
    __global const P* row = x + r * S;
    T m = LD_P(row, 0) * scale;  // key 0 is always kept: every item starts from it
    for (IDX j = t; j < keep; j += WG)
        m = max_(m, LD_P(row, j) * scale);
    m = group_max(m, scratch);
    T s = 0;
    for (IDX j = t; j < keep; j += WG)
        s += exp(LD_P(row, j) * scale - m);
    s = group_sum(s, scratch);
    for (IDX j = t; j < S; j += WG)
        ST_P(out, r * S + j, j < keep ? exp(LD_P(row, j) * scale - m) / s : (T)0);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void causal_softmax_grad(__global P* grad_x, __global const P* grad, __global const P* out,
                         const T scale, const layout_t L)
{
    __local T scratch[WG];
    const IDX r = get_group_id(0), S = L.v[2];
    const int t = get_local_id(0);
    const IDX i = r % L.v[1];
    const IDX keep = i + 1 < S ? i + 1 : S;
    T s = 0;
    for (IDX j = t; j < keep; j += WG)
        s += LD_P(grad, r * S + j) * LD_P(out, r * S + j);
    s = group_sum(s, scratch);
    for (IDX j = t; j < S; j += WG)
        ST_P(grad_x, r * S + j,
             j < keep ? (LD_P(out, r * S + j) * (LD_P(grad, r * S + j) - s)) * scale : (T)0);
}

// ---- dropout_mask: out[i] = scale where splitmix64(seed + (i + 1) * golden) >> 40 reaches
// threshold, else 0 (ndlite/device/transformer_fallbacks.py); dropout: x times it -------------

inline T dropout_value_(const ulong seed, const ulong threshold, const T scale, const long i)
{
    ulong z = seed + (ulong)(i + 1) * 0x9E3779B97F4A7C15UL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    z = z ^ (z >> 31);
    return (z >> 40) >= threshold ? scale : (T)0;
}

__kernel void dropout_mask(__global P* out, const ulong seed, const ulong threshold,
                           const T scale, const long n)
{
    const long i = get_global_id(0);
    if (i < n)
        ST_P(out, i, dropout_value_(seed, threshold, scale, i));
}

// dropout: out[i] = x[offset + i] * the mask's value, drawn in place (never stored): bitwise
// x * dropout_mask(...) for a contiguous x of floats (transformer.py)
__kernel void dropout(__global P* out, __global const P* x, const long offset, const ulong seed,
                      const ulong threshold, const T scale, const long n)
{
    const long i = get_global_id(0);
    if (i < n)
        ST_P(out, i, LD_P(x, offset + i) * dropout_value_(seed, threshold, scale, i));
}
