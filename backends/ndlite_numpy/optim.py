"""Fused, parallel optimizer steps for the NumPy backend (numba, optional; see kernels.py).

NumPy runs the reference update (ndlite.device.fallbacks) as a dozen passes over every
parameter, each on one core; these kernels make one pass on all threads. They do the same
float operations in the same order in the parameter's dtype (no fast-math, so no fused
multiply-adds), so the results are bitwise those of the NumPy path. From MIN_SIZE elements
the parallel kernel runs on numba's threads; smaller parameters take the same kernel compiled
serial, on the calling thread (a parallel launch costs tens of microseconds, a serial call a
few, where the NumPy path's dozen calls cost ~15 us: the tiny MLP's Adam). AMSGrad takes the
NumPy path. RMSprop (the seed CNN's optimizer) likewise, centered or not, with or without
momentum.
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels, threads

#: parameters smaller than this take the serial kernels (a parallel launch costs tens of
#: microseconds)
MIN_SIZE = 1 << 16
#: RMSprop's serial kernel is not vectorized (its square root and division, branches around
#: them): 51,200 floats took it 0.09 ms, NumPy's passes 0.06, the parallel kernel on one
#: thread 0.015 (its loop is): from here the parallel one
RMSPROP_MIN_SIZE = 1 << 14

if kernels.numba is not None:
    from numba import njit, prange

    # one element's update, inlined into a parallel loop and a serial one (two functions, so
    # that numba's cache keeps both)
    @njit(inline="always")
    def _adam_one(i, param, grad, exp_avg, exp_avg_sq, beta1, one_minus_beta1, beta2,
                  one_minus_beta2, sqrt_bc2, eps, step_size, decay, coupled):
        p = param[i] * decay
        g = grad[i] + param[i] * coupled if coupled else grad[i]
        m = exp_avg[i] * beta1 + g * one_minus_beta1
        v = exp_avg_sq[i] * beta2 + (g * g) * one_minus_beta2
        exp_avg[i], exp_avg_sq[i] = m, v
        param[i] = p - (m / (np.sqrt(v) / sqrt_bc2 + eps)) * step_size

    @kernels._jit
    def _adam(param, grad, exp_avg, exp_avg_sq, beta1, one_minus_beta1, beta2,
              one_minus_beta2, sqrt_bc2, eps, step_size, decay, coupled):
        for i in prange(param.size):
            _adam_one(i, param, grad, exp_avg, exp_avg_sq, beta1, one_minus_beta1, beta2,
                      one_minus_beta2, sqrt_bc2, eps, step_size, decay, coupled)

    @kernels._serial
    def _adam_serial(param, grad, exp_avg, exp_avg_sq, beta1, one_minus_beta1, beta2,
              one_minus_beta2, sqrt_bc2, eps, step_size, decay, coupled):
        for i in range(param.size):
            _adam_one(i, param, grad, exp_avg, exp_avg_sq, beta1, one_minus_beta1, beta2,
                      one_minus_beta2, sqrt_bc2, eps, step_size, decay, coupled)

    @njit(inline="always")
    def _sgd_one(i, param, grad, buf, lr, momentum, one_minus_dampening, weight_decay, first,
                 nesterov):
        g = grad[i] + param[i] * weight_decay if weight_decay else grad[i]
        b = g if first else buf[i] * momentum + g * one_minus_dampening
        buf[i] = b
        g = g + b * momentum if nesterov else b
        param[i] = param[i] - g * lr

    @kernels._jit
    def _sgd(param, grad, buf, lr, momentum, one_minus_dampening, weight_decay, first,
             nesterov):
        for i in prange(param.size):
            _sgd_one(i, param, grad, buf, lr, momentum, one_minus_dampening, weight_decay,
                     first, nesterov)

    @kernels._serial
    def _sgd_serial(param, grad, buf, lr, momentum, one_minus_dampening, weight_decay, first,
             nesterov):
        for i in range(param.size):
            _sgd_one(i, param, grad, buf, lr, momentum, one_minus_dampening, weight_decay,
                     first, nesterov)


    @njit(inline="always")
    def _rmsprop_one(i, param, grad, square_avg, grad_avg, buf, lr, alpha, one_minus_alpha,
                     eps, momentum, weight_decay, centered, has_momentum):
        g = grad[i] + param[i] * weight_decay if weight_decay else grad[i]
        sq = square_avg[i] * alpha + (g * g) * one_minus_alpha
        square_avg[i] = sq
        if centered:
            ga = grad_avg[i] * alpha + g * one_minus_alpha
            grad_avg[i] = ga
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        step = g / avg
        if has_momentum:
            step = buf[i] * momentum + step
            buf[i] = step
        param[i] = param[i] - step * lr

    @kernels._jit
    def _rmsprop(param, grad, square_avg, grad_avg, buf, lr, alpha, one_minus_alpha, eps,
                 momentum, weight_decay, centered, has_momentum):
        for i in prange(param.size):
            _rmsprop_one(i, param, grad, square_avg, grad_avg, buf, lr, alpha, one_minus_alpha,
                         eps, momentum, weight_decay, centered, has_momentum)

    @kernels._serial
    def _rmsprop_serial(param, grad, square_avg, grad_avg, buf, lr, alpha, one_minus_alpha,
                        eps, momentum, weight_decay, centered, has_momentum):
        # _rmsprop_one written out: inlined here (inline="always") it ran 15x slower
        # (51,200 floats: 1.5 against 0.09 ms), in the parallel loop it does not
        for i in range(param.size):
            g = grad[i] + param[i] * weight_decay if weight_decay else grad[i]
            sq = square_avg[i] * alpha + (g * g) * one_minus_alpha
            square_avg[i] = sq
            if centered:
                ga = grad_avg[i] * alpha + g * one_minus_alpha
                grad_avg[i] = ga
                avg = np.sqrt(sq - ga * ga) + eps
            else:
                avg = np.sqrt(sq) + eps
            step = g / avg
            if has_momentum:
                step = buf[i] * momentum + step
                buf[i] = step
            param[i] = param[i] - step * lr


def _launch(parallel, serial, *args, least: int = MIN_SIZE) -> None:
    if args[0].size < least or not kernels.parallel():
        serial(*args)
    else:
        kernels._launch(parallel, threads.total(), *args)


def _fits(param, *arrays) -> bool:
    if kernels.numba is None or param.dtype.char not in "fd":
        return False
    return all(a is not None and a.dtype == param.dtype and a.shape == param.shape
               and a.flags.c_contiguous for a in (param, *arrays))


def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1,
              beta2, eps, weight_decay, decoupled_weight_decay) -> bool:
    """The fused Adam / AdamW step; False when it does not apply (the caller runs the
    reference)."""
    if max_exp_avg_sq is not None or not _fits(param, grad, exp_avg, exp_avg_sq):
        return False
    t = param.dtype.type
    decay = 1 - lr * weight_decay if weight_decay and decoupled_weight_decay else 1.0
    coupled = weight_decay if weight_decay and not decoupled_weight_decay else 0.0
    bias_correction1, bias_correction2 = 1 - beta1 ** step, 1 - beta2 ** step
    flat = [a.reshape(-1) for a in (param, grad, exp_avg, exp_avg_sq)]
    _launch(_adam, _adam_serial, *flat, t(beta1), t(1 - beta1), t(beta2), t(1 - beta2),
            t(math.sqrt(bias_correction2)), t(eps), t(lr / bias_correction1), t(decay),
            t(coupled))
    return True


def sgd_step(param, grad, momentum_buffer, lr, momentum, dampening, nesterov,
             weight_decay, first_step) -> bool:
    """The fused SGD step with momentum; False when it does not apply."""
    if not momentum or not _fits(param, grad, momentum_buffer):
        return False
    t = param.dtype.type
    flat = [a.reshape(-1) for a in (param, grad, momentum_buffer)]
    _launch(_sgd, _sgd_serial, *flat, t(lr), t(momentum), t(1 - dampening), t(weight_decay),
            bool(first_step), bool(nesterov))
    return True


def rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps, momentum,
                 weight_decay) -> bool:
    """The fused RMSprop step (centered or not, with or without momentum): the reference's
    float operations in its order; False when it does not apply."""
    given = [a for a in (grad_avg, momentum_buffer) if a is not None]
    if not _fits(param, grad, square_avg, *given):
        return False
    t = param.dtype.type
    flat = [a.reshape(-1) for a in (param, grad, square_avg)]
    unused = flat[0][:0]  # a typed stand-in for an absent buffer
    extra = [unused if a is None else a.reshape(-1) for a in (grad_avg, momentum_buffer)]
    _launch(_rmsprop, _rmsprop_serial, *flat, *extra, t(lr), t(alpha), t(1 - alpha), t(eps),
            t(momentum), t(weight_decay), grad_avg is not None, momentum_buffer is not None,
            least=RMSPROP_MIN_SIZE)
    return True
