// The batch-norm fast paths of the OpenCL backend (norm.py); their specification is
// ndlite/device/norm_fallbacks.py. Every sum runs in an order fixed by the shape: no atomics,
// the same bits run to run.
//
// x (N, C, S) row-major, S the trailing dims' size; channel c's M = N * S values are taken in
// the order e = n * S + s and cut into K chunks of `per` (the last shorter):
//   bn_chunk_stats: one work-group of WG (a power of two; 1 on a CPU) per (c, k): the chunk's
//     mean, then the sum of squares about it (two passes over the chunk, group sums as a
//     fixed tree in local memory);
//   bn_stats: one item per channel combines its K chunks in ascending k (Chan's pairwise
//     update of count, mean and sum of squares): mean, var = m2 / M, invstd;
//   bn_normalize: the planes p = n * C + c along dim 1 of the grid, a plane's S values over
//     dim 0 of its work-group (norm.py fits the group to S; on a CPU one item per plane):
//     y = (x - mean) * invstd * weight + bias, with no division per element;
//   bn_chunk_grad: per (c, k) as bn_chunk_stats, the chunk's sums of grad and grad * xhat;
//   bn_grad_sums: per channel, the chunks' sums in ascending k;
//   bn_grad_input: as bn_normalize, grad_x = ((grad - sum_dy / M) - xhat * sum_dy_xhat / M)
//     * (invstd * weight).
// A chunk's values are walked without a division per element either (BN_WALK): an item's
// offset advances by a fixed jump per step of WG, plus (C - 1) * S where its position in the
// plane wraps.
// #defines: T (arithmetic), IDX, WG, P (the element type of x, y, grad, weight and bias, read by
// LD_P and written by ST_P: a half is computed in float and rounded once when stored; the
// statistics and partial sums are T, float32 for halves, as PyTorch keeps them).
// Layout: N, C, S, per, K.

// `body` for each value of channel c an item reads, from element `first` = n * S + s in steps
// of WG up to `end`, its offset `at` = (n * C + c) * S + s
#define BN_WALK(first, end, c, body)                                                         \
    {                                                                                        \
        const IDX n0_ = (first) / S, dn_ = WG / S, ds_ = WG - dn_ * S;                       \
        const IDX jump_ = dn_ * C * S + ds_, wrap_ = (C - 1) * S;                            \
        IDX s_ = (first) - n0_ * S, at = (n0_ * C + (c)) * S + s_;                           \
        for (IDX e_ = (first); e_ < (end); e_ += WG) {                                       \
            body;                                                                            \
            at += jump_;                                                                     \
            s_ += ds_;                                                                       \
            if (s_ >= S) {                                                                   \
                s_ -= S;                                                                     \
                at += wrap_;                                                                 \
            }                                                                                \
        }                                                                                    \
    }

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_chunk_stats(__global T* chunk_mean, __global T* chunk_m2, __global const P* x,
                    const layout_t L)
{
    __local T scratch[WG];
    const IDX C = L.v[1], S = L.v[2], per = L.v[3], K = L.v[4], M = L.v[0] * S;
    const IDX q = get_group_id(0), c = q / K, k = q - c * K;
    const int t = get_local_id(0);
    const IDX start = k * per, end = start + per < M ? start + per : M;
    T s = 0;
    BN_WALK(start + t, end, c, s += LD_P(x, at));
    const T mu = group_sum(s, scratch) / (T)(end - start);
    T m2 = 0;
    BN_WALK(start + t, end, c, const T d = LD_P(x, at) - mu; m2 += d * d);
    m2 = group_sum(m2, scratch);
    if (t == 0) {
        chunk_mean[q] = mu;
        chunk_m2[q] = m2;
    }
}

__kernel void bn_stats(__global T* mean, __global T* invstd, __global T* var,
                       __global const T* chunk_mean, __global const T* chunk_m2, const T eps,
                       const layout_t L)
{
    const IDX c = get_global_id(0), C = L.v[1], per = L.v[3], K = L.v[4];
    const IDX M = L.v[0] * L.v[2];
    if (c >= C)
        return;
    T n = 0, mu = 0, m2 = 0;
    for (IDX k = 0; k < K; ++k) {
        const IDX size = (k + 1) * per < M ? per : M - k * per;
        const T nb = (T)size, total = n + nb, delta = chunk_mean[c * K + k] - mu;
        mu = mu + delta * (nb / total);
        m2 = m2 + chunk_m2[c * K + k] + delta * delta * (n * nb / total);
        n = total;
    }
    const T v = m2 / (T)M;
    mean[c] = mu;
    var[c] = v;
    invstd[c] = (T)1 / sqrt(v + eps);
}

__kernel void bn_normalize(__global P* y, __global const P* x, __global const T* mean,
                           __global const T* invstd, __global const P* weight,
                           __global const P* bias, const layout_t L)
{
    const IDX p = get_global_id(1), C = L.v[1], S = L.v[2];
    if (p >= L.v[0] * C)
        return;
    const IDX c = p % C, step = get_local_size(0);
    const T mu = mean[c], rs = invstd[c];
    for (IDX j = get_local_id(0); j < S; j += step) {
        T v = (LD_P(x, p * S + j) - mu) * rs;
        if (weight)
            v = v * LD_P(weight, c);
        if (bias)
            v = v + LD_P(bias, c);
        ST_P(y, p * S + j, v);
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_chunk_grad(__global T* chunk_dy, __global T* chunk_dy_xhat, __global const P* grad,
                   __global const P* x, __global const T* mean, __global const T* invstd,
                   const layout_t L)
{
    __local T scratch[WG];
    const IDX C = L.v[1], S = L.v[2], per = L.v[3], K = L.v[4], M = L.v[0] * S;
    const IDX q = get_group_id(0), c = q / K, k = q - c * K;
    const int t = get_local_id(0);
    const IDX start = k * per, end = start + per < M ? start + per : M;
    const T mu = mean[c], rs = invstd[c];
    T s1 = 0, s2 = 0;
    BN_WALK(start + t, end, c, const T g = LD_P(grad, at); s1 += g;
            s2 += g * ((LD_P(x, at) - mu) * rs));
    s1 = group_sum(s1, scratch);
    s2 = group_sum(s2, scratch);
    if (t == 0) {
        chunk_dy[q] = s1;
        chunk_dy_xhat[q] = s2;
    }
}

__kernel void bn_grad_sums(__global T* sum_dy, __global T* sum_dy_xhat,
                           __global const T* chunk_dy, __global const T* chunk_dy_xhat,
                           const layout_t L)
{
    const IDX c = get_global_id(0), C = L.v[1], K = L.v[4];
    if (c >= C)
        return;
    T s1 = 0, s2 = 0;
    for (IDX k = 0; k < K; ++k) {
        s1 += chunk_dy[c * K + k];
        s2 += chunk_dy_xhat[c * K + k];
    }
    sum_dy[c] = s1;
    sum_dy_xhat[c] = s2;
}

__kernel void bn_grad_input(__global P* grad_x, __global const P* grad, __global const P* x,
                            __global const T* mean, __global const T* invstd,
                            __global const P* weight, __global const T* sum_dy,
                            __global const T* sum_dy_xhat, const layout_t L)
{
    const IDX p = get_global_id(1), C = L.v[1], S = L.v[2];
    const IDX M = L.v[0] * S;
    if (p >= L.v[0] * C)
        return;
    const IDX c = p % C, step = get_local_size(0);
    const T mu = mean[c], rs = invstd[c];
    const T m1 = sum_dy[c] / (T)M, m2 = sum_dy_xhat[c] / (T)M;
    const T scale = weight ? rs * LD_P(weight, c) : rs;
    for (IDX j = get_local_id(0); j < S; j += step) {
        const T xhat = (LD_P(x, p * S + j) - mu) * rs;
        ST_P(grad_x, p * S + j, ((LD_P(grad, p * S + j) - m1) - xhat * m2) * scale);
    }
}

// bn_update: the running statistics in place, one item per channel (C = L.v[1]), each product
// and sum rounded on its own (no contraction into a fused multiply-add: the fallback's bits):
//   running_mean = running_mean * keep + mean * momentum,
//   running_var = running_var * keep + (var * unbias) * momentum.
__kernel void bn_update(__global T* running_mean, __global T* running_var,
                        __global const T* mean, __global const T* var, const T keep,
                        const T momentum, const T unbias, const layout_t L)
{
#pragma OPENCL FP_CONTRACT OFF
    const IDX c = get_global_id(0);
    if (c >= L.v[1])
        return;
    const T kept_mean = running_mean[c] * keep, new_mean = mean[c] * momentum;
    running_mean[c] = kept_mean + new_mean;
    const T unbiased = var[c] * unbias, new_var = unbiased * momentum;
    const T kept_var = running_var[c] * keep;
    running_var[c] = kept_var + new_var;
}
