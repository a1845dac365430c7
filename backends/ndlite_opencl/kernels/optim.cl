// Fused optimizer steps, in place, one work-item per parameter element: each reads param, grad
// and its state once and writes them back once (the fallback makes a pass per operation).
// Every step does the fallback's operations in the fallback's order (fallbacks.py spells the
// rules out), with contraction into fused multiply-adds off, so a device whose division and
// sqrt round correctly gives the fallback's bits. Options are runtime flags, not #defines:
// one program per dtype serves every configuration.
// #defines: T. Scalars arrive already rounded to T, as the fallback's scalar operands are.

#pragma OPENCL FP_CONTRACT OFF

#define WEIGHT_DECAY 1
#define MOMENTUM 2
#define NESTEROV 4
#define FIRST_STEP 8
#define CENTERED 16
#define DECOUPLED 32
#define AMSGRAD 64

// NumPy's maximum: NaN propagates
inline T maximum_(const T a, const T b) { return (a > b || a != a) ? a : b; }

__kernel void sgd_step(__global T* param, __global const T* grad, __global T* buf,
                       const int n, const int flags, const T lr, const T momentum,
                       const T one_minus_dampening, const T weight_decay)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const T p = param[i];
    T g = grad[i];
    if (flags & WEIGHT_DECAY)
        g = g + p * weight_decay;
    if (flags & MOMENTUM) {
        const T b = (flags & FIRST_STEP) ? g : buf[i] * momentum + g * one_minus_dampening;
        buf[i] = b;
        g = (flags & NESTEROV) ? g + b * momentum : b;
    }
    param[i] = p - g * lr;
}

__kernel void rmsprop_step(__global T* param, __global const T* grad, __global T* square_avg,
                           __global T* grad_avg, __global T* buf, const int n, const int flags,
                           const T lr, const T alpha, const T one_minus_alpha, const T eps,
                           const T momentum, const T weight_decay)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const T p = param[i];
    T g = grad[i];
    if (flags & WEIGHT_DECAY)
        g = g + p * weight_decay;
    const T v = square_avg[i] * alpha + (g * g) * one_minus_alpha;
    square_avg[i] = v;
    T avg;
    if (flags & CENTERED) {
        const T a = grad_avg[i] * alpha + g * one_minus_alpha;
        grad_avg[i] = a;
        avg = sqrt(v - a * a) + eps;
    } else {
        avg = sqrt(v) + eps;
    }
    if (flags & MOMENTUM) {
        const T b = buf[i] * momentum + g / avg;
        buf[i] = b;
        param[i] = p - b * lr;
    } else {
        param[i] = p - (g / avg) * lr;
    }
}

__kernel void adam_step(__global T* param, __global const T* grad, __global T* exp_avg,
                        __global T* exp_avg_sq, __global T* max_exp_avg_sq, const int n,
                        const int flags, const T decay_factor, const T weight_decay,
                        const T beta1, const T one_minus_beta1, const T beta2,
                        const T one_minus_beta2, const T sqrt_bias_correction2, const T eps,
                        const T step_size)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    T p = param[i];
    T g = grad[i];
    if ((flags & WEIGHT_DECAY) && (flags & DECOUPLED))
        p = p * decay_factor;
    else if (flags & WEIGHT_DECAY)
        g = g + p * weight_decay;
    const T m = exp_avg[i] * beta1 + g * one_minus_beta1;
    exp_avg[i] = m;
    T v = exp_avg_sq[i] * beta2 + (g * g) * one_minus_beta2;
    exp_avg_sq[i] = v;
    if (flags & AMSGRAD) {
        v = maximum_(max_exp_avg_sq[i], v);
        max_exp_avg_sq[i] = v;
    }
    const T denom = sqrt(v) / sqrt_bias_correction2 + eps;
    param[i] = p - (m / denom) * step_size;
}
