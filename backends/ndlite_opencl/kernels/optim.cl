// Fused optimizer steps, in place, one work-item per parameter element: each reads param, grad
// and its state once and writes them back once (the fallback makes a pass per operation).
// Every step does the fallback's operations in the fallback's order (fallbacks.py spells the
// rules out), with contraction into fused multiply-adds off, so a device whose division and
// sqrt round correctly gives the fallback's bits. Options are runtime flags, not #defines:
// one program per dtype serves every configuration. Each update is written once (sgd_at,
// rmsprop_at, adam_at) and called by a kernel of one parameter and a kernel of several.
// #defines: T (arithmetic), P (the buffers' element type, read by LD_P, written by ST_P: a
// half is computed in float and each buffer rounded once when stored), SLOTS (optional).
// The hyperparameters arrive in one struct (S.v[...], named below), already rounded to T as
// the fallback's scalar operands are; every parameter of an optimizer shares it, so the host
// sets that argument once, not once per parameter.

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

// ---- the update of element i of one parameter, shared by the one-parameter kernels and the
// multi-parameter ones below (the same code: the same bits)

inline void sgd_at(__global P* param, __global const P* grad, __global P* buf, const int i,
                   const int flags, const scalars_t S)
{
    const T lr = S.v[0], momentum = S.v[1], one_minus_dampening = S.v[2];
    const T weight_decay = S.v[3];
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

inline void rmsprop_at(__global P* param, __global const P* grad, __global P* square_avg,
                       __global P* grad_avg, __global P* buf, const int i, const int flags,
                       const scalars_t S)
{
    const T lr = S.v[0], alpha = S.v[1], one_minus_alpha = S.v[2], eps = S.v[3];
    const T momentum = S.v[4], weight_decay = S.v[5];
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

inline void adam_at(__global P* param, __global const P* grad, __global P* exp_avg,
                    __global P* exp_avg_sq, __global P* max_exp_avg_sq, const int i,
                    const int flags, const scalars_t S)
{
    const T decay_factor = S.v[0], weight_decay = S.v[1], beta1 = S.v[2];
    const T one_minus_beta1 = S.v[3], beta2 = S.v[4], one_minus_beta2 = S.v[5];
    const T sqrt_bias_correction2 = S.v[6], eps = S.v[7], step_size = S.v[8];
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

// ---- one parameter a launch: one work-item per element

__kernel void sgd_step(__global P* param, __global const P* grad, __global P* buf,
                       const int n, const int flags, const scalars_t S)
{
    const int i = get_global_id(0);
    if (i < n)
        sgd_at(param, grad, buf, i, flags, S);
}

__kernel void rmsprop_step(__global P* param, __global const P* grad, __global P* square_avg,
                           __global P* grad_avg, __global P* buf, const int n, const int flags,
                           const scalars_t S)
{
    const int i = get_global_id(0);
    if (i < n)
        rmsprop_at(param, grad, square_avg, grad_avg, buf, i, flags, S);
}

__kernel void adam_step(__global P* param, __global const P* grad, __global P* exp_avg,
                        __global P* exp_avg_sq, __global P* max_exp_avg_sq, const int n,
                        const int flags, const scalars_t S)
{
    const int i = get_global_id(0);
    if (i < n)
        adam_at(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, i, flags, S);
}

// ---- up to SLOTS parameters a launch (optim.py's sgd_steps, rmsprop_steps, adam_steps): each
// work-item updates one element of one of them. OpenCL 1.2 has no pointers in buffers, so each
// slot k brings its buffers as arguments, with start##k (its first element's index among the
// launch's n; an unused slot starts at n) and flags##k (sgd's FIRST_STEP, a state present or
// not, differ per parameter). A work-item's slot is the last whose start it has reached. The
// hyperparameters come as nine scalars, not a struct: a driver may take longer to set a struct
// (PoCL ~5 us) than all the other arguments together, and these change with every call.

#ifndef SLOTS
#define SLOTS 16
#endif
#define EACH_1(X) X(0)
#define EACH_2(X) EACH_1(X) X(1)
#define EACH_4(X) EACH_2(X) X(2) X(3)
#define EACH_8(X) EACH_4(X) X(4) X(5) X(6) X(7)
#define EACH_16(X) EACH_8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define EACH_N(n, X) EACH_##n(X)
#define EACH_OF(n, X) EACH_N(n, X)
#define EACH_SLOT(X) EACH_OF(SLOTS, X)
#define SCALAR_ARGS const T s0, const T s1, const T s2, const T s3, const T s4, const T s5, \
                    const T s6, const T s7, const T s8
#define SCALARS {{s0, s1, s2, s3, s4, s5, s6, s7, s8}}
// the work-item's index as an int, or return: n < 2^31, but the grid, rounded up to whole
// work-groups, may pass it
#define ELEMENT(i) \
    if (get_global_id(0) >= (size_t)n) \
        return; \
    const int i = get_global_id(0)

#define SGD_SLOT(k) __global P* param##k, __global const P* grad##k, __global P* buf##k, \
                    const int start##k, const int flags##k,
#define SGD_FIND(k) if (i >= start##k) { \
        param = param##k; grad = grad##k; buf = buf##k; start = start##k; flags = flags##k; }

__kernel void sgd_steps(EACH_SLOT(SGD_SLOT) const int n, SCALAR_ARGS)
{
    ELEMENT(i);
    __global P* param = param0; __global const P* grad = grad0; __global P* buf = buf0;
    int start = 0, flags = flags0;
    EACH_SLOT(SGD_FIND)
    const scalars_t S = SCALARS;
    sgd_at(param, grad, buf, i - start, flags, S);
}

#define RMSPROP_SLOT(k) __global P* param##k, __global const P* grad##k, \
                        __global P* square_avg##k, __global P* grad_avg##k, __global P* buf##k, \
                        const int start##k, const int flags##k,
#define RMSPROP_FIND(k) if (i >= start##k) { \
        param = param##k; grad = grad##k; square_avg = square_avg##k; grad_avg = grad_avg##k; \
        buf = buf##k; start = start##k; flags = flags##k; }

__kernel void rmsprop_steps(EACH_SLOT(RMSPROP_SLOT) const int n, SCALAR_ARGS)
{
    ELEMENT(i);
    __global P* param = param0; __global const P* grad = grad0;
    __global P* square_avg = square_avg0; __global P* grad_avg = grad_avg0; __global P* buf = buf0;
    int start = 0, flags = flags0;
    EACH_SLOT(RMSPROP_FIND)
    const scalars_t S = SCALARS;
    rmsprop_at(param, grad, square_avg, grad_avg, buf, i - start, flags, S);
}

#define ADAM_SLOT(k) __global P* param##k, __global const P* grad##k, __global P* exp_avg##k, \
                     __global P* exp_avg_sq##k, __global P* max_exp_avg_sq##k, \
                     const int start##k, const int flags##k,
#define ADAM_FIND(k) if (i >= start##k) { \
        param = param##k; grad = grad##k; exp_avg = exp_avg##k; exp_avg_sq = exp_avg_sq##k; \
        max_exp_avg_sq = max_exp_avg_sq##k; start = start##k; flags = flags##k; }

__kernel void adam_steps(EACH_SLOT(ADAM_SLOT) const int n, SCALAR_ARGS)
{
    ELEMENT(i);
    __global P* param = param0; __global const P* grad = grad0; __global P* exp_avg = exp_avg0;
    __global P* exp_avg_sq = exp_avg_sq0; __global P* max_exp_avg_sq = max_exp_avg_sq0;
    int start = 0, flags = flags0;
    EACH_SLOT(ADAM_FIND)
    const scalars_t S = SCALARS;
    adam_at(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, i - start, flags, S);
}
