"""Fused optimizer steps (SGD, RMSprop, Adam/AdamW) with kernels/optim.cl: one launch per
parameter updates it and its state in place, reading and writing each buffer once.

Buffers that are not row-major from offset 0 (never the case for parameters the core made)
take the core's fallback, which handles any view. Halves are computed in float32, each
buffer rounded once when stored (the fallback too runs on float32 copies: halves.py).
"""

from __future__ import annotations

import math

import numpy as np

from ndlite.device import fallbacks

from . import halves
from .array import INT32_LIMIT
from .kernels import actype, arith, slot

WEIGHT_DECAY, MOMENTUM, NESTEROV, FIRST_STEP, CENTERED, DECOUPLED, AMSGRAD = (
    1, 2, 4, 8, 16, 32, 64)


def _fusable(param, *buffers) -> bool:
    if param.size == 0 or param.size > INT32_LIMIT:
        return False
    return all(x is None or (x.contiguous and x.offset == 0 and x.shape == param.shape
                             and x.dtype == param.dtype) for x in (param, *buffers))


def _launch(b, name: str, param, buffers: list, flags: int, scalars: tuple) -> None:
    kernel = b.kernels.get("optim.cl", name, (("IDX", "int"), ("LAYOUT_LEN", 1),
                                              ("T", actype(param.dtype)), *slot("P", param.dtype)))
    data = [(x if x is not None else param).data for x in buffers]  # unused ones: any buffer
    values = (*scalars, *(0.0,) * (9 - len(scalars)))  # the struct has 9 slots
    b._launch(kernel, param.size, (param.data, *data, np.int32(param.size), np.int32(flags),
                                   b.layout(values, arith(param.dtype).type)))


def sgd_step(b, param, grad, momentum_buffer, lr, momentum, dampening, nesterov, weight_decay,
             first_step):
    if not _fusable(param, grad, momentum_buffer):
        return halves.core(b, fallbacks.sgd_step, param, grad, momentum_buffer, lr, momentum,
                        dampening, nesterov, weight_decay, first_step)
    flags = ((WEIGHT_DECAY if weight_decay else 0) | (MOMENTUM if momentum else 0)
             | (NESTEROV if nesterov else 0) | (FIRST_STEP if first_step else 0))
    _launch(b, "sgd_step", param, [grad, momentum_buffer], flags,
            (lr, momentum, 1 - dampening, weight_decay))


def rmsprop_step(b, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps,
                 momentum, weight_decay):
    if not _fusable(param, grad, square_avg, grad_avg, momentum_buffer):
        return halves.core(b, fallbacks.rmsprop_step, param, grad, square_avg, grad_avg,
                        momentum_buffer, lr, alpha, eps, momentum, weight_decay)
    flags = ((WEIGHT_DECAY if weight_decay else 0) | (CENTERED if grad_avg is not None else 0)
             | (MOMENTUM if momentum_buffer is not None else 0))
    _launch(b, "rmsprop_step", param, [grad, square_avg, grad_avg, momentum_buffer], flags,
            (lr, alpha, 1 - alpha, eps, momentum, weight_decay))


def adam_step(b, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
              weight_decay, decoupled_weight_decay):
    if not _fusable(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq):
        return halves.core(b, fallbacks.adam_step, param, grad, exp_avg, exp_avg_sq,
                        max_exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay,
                        decoupled_weight_decay)
    flags = ((WEIGHT_DECAY if weight_decay else 0)
             | (DECOUPLED if decoupled_weight_decay else 0)
             | (AMSGRAD if max_exp_avg_sq is not None else 0))
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    _launch(b, "adam_step", param, [grad, exp_avg, exp_avg_sq, max_exp_avg_sq], flags,
            (1 - lr * weight_decay, weight_decay, beta1, 1 - beta1, beta2, 1 - beta2,
             math.sqrt(bias_correction2), eps, lr / bias_correction1))
