// Fused optimizer steps, in place, one work-item per parameter element: each reads param, grad
// and its state once and writes them back once (the fallback makes a pass per operation).
// Every step does the fallback's operations in the fallback's order (fallbacks.py spells the
// rules out), with contraction into fused multiply-adds off, so a device whose division and
// sqrt round correctly gives the fallback's bits. Options are runtime flags, not #defines:
// one program per dtype serves every configuration.
// #defines: T (arithmetic), P (the buffers' element type, read by LD_P, written by ST_P: a
// half is computed in float and each buffer rounded once when stored). The hyperparameters arrive in one struct (S.v[...], named below), already
// rounded to T as the fallback's scalar operands are; every parameter of an optimizer shares
// it, so the host sets that argument once, not once per parameter.

#pragma OPENCL FP_CONTRACT OFF

typedef struct { T v[9]; } scalars_t;

#define WEIGHT_DECAY 1
#define MOMENTUM 2
#define NESTEROV 4
#define FIRST_STEP 8
#define CENTERED 16
#define DECOUPLED 32
#define AMSGRAD 64

// NumPy's maximum: NaN propagates
inline T maximum_(const T a, const T b) { return (a > b || a != a) ? a : b; }

__kernel void sgd_step(__global P* param, __global const P* grad, __global P* buf,
                       const int n, const int flags, const scalars_t S)
{
    const T lr = S.v[0], momentum = S.v[1], one_minus_dampening = S.v[2];
    const T weight_decay = S.v[3];
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const T p = LD_P(param, i);
    T g = LD_P(grad, i);
    if (flags & WEIGHT_DECAY)
        g = g + p * weight_decay;
    if (flags & MOMENTUM) {
        const T b = (flags & FIRST_STEP) ? g
                                         : LD_P(buf, i) * momentum + g * one_minus_dampening;
        ST_P(buf, i, b);
        g = (flags & NESTEROV) ? g + b * momentum : b;
    }
    ST_P(param, i, p - g * lr);
}

__kernel void rmsprop_step(__global P* param, __global const P* grad, __global P* square_avg,
                           __global P* grad_avg, __global P* buf, const int n, const int flags,
                           const scalars_t S)
{
    const T lr = S.v[0], alpha = S.v[1], one_minus_alpha = S.v[2], eps = S.v[3];
    const T momentum = S.v[4], weight_decay = S.v[5];
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const T p = LD_P(param, i);
    T g = LD_P(grad, i);
    if (flags & WEIGHT_DECAY)
        g = g + p * weight_decay;
    const T v = LD_P(square_avg, i) * alpha + (g * g) * one_minus_alpha;
    ST_P(square_avg, i, v);
    T avg;
    if (flags & CENTERED) {
        const T a = LD_P(grad_avg, i) * alpha + g * one_minus_alpha;
        ST_P(grad_avg, i, a);
        avg = sqrt(v - a * a) + eps;
    } else {
        avg = sqrt(v) + eps;
    }
    if (flags & MOMENTUM) {
        const T b = LD_P(buf, i) * momentum + g / avg;
        ST_P(buf, i, b);
        ST_P(param, i, p - b * lr);
    } else {
        ST_P(param, i, p - (g / avg) * lr);
    }
}

__kernel void adam_step(__global P* param, __global const P* grad, __global P* exp_avg,
                        __global P* exp_avg_sq, __global P* max_exp_avg_sq, const int n,
                        const int flags, const scalars_t S)
{
    const T decay_factor = S.v[0], weight_decay = S.v[1], beta1 = S.v[2];
    const T one_minus_beta1 = S.v[3], beta2 = S.v[4], one_minus_beta2 = S.v[5];
    const T sqrt_bias_correction2 = S.v[6], eps = S.v[7], step_size = S.v[8];
    const int i = get_global_id(0);
    if (i >= n)
        return;
    T p = LD_P(param, i);
    T g = LD_P(grad, i);
    if ((flags & WEIGHT_DECAY) && (flags & DECOUPLED))
        p = p * decay_factor;
    else if (flags & WEIGHT_DECAY)
        g = g + p * weight_decay;
    const T m = LD_P(exp_avg, i) * beta1 + g * one_minus_beta1;
    ST_P(exp_avg, i, m);
    T v = LD_P(exp_avg_sq, i) * beta2 + (g * g) * one_minus_beta2;
    ST_P(exp_avg_sq, i, v);
    if (flags & AMSGRAD) {
        v = maximum_(LD_P(max_exp_avg_sq, i), v);
        ST_P(max_exp_avg_sq, i, v);
    }
    const T denom = sqrt(v) / sqrt_bias_correction2 + eps;
    ST_P(param, i, p - (m / denom) * step_size);
}
