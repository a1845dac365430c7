"""Fused optimizer steps (SGD, RMSprop, Adam/AdamW) with kernels/optim.cl: one launch per
parameter updates it and its state in place, reading and writing each buffer once; the
multi-parameter steps (sgd_steps, rmsprop_steps, adam_steps) update up to SLOTS parameters a
launch, with the same code per element, so the same bits as one launch per parameter.

Buffers that are not row-major from offset 0 (never the case for parameters the core made)
take the core's fallback, which handles any view. Halves are computed in float32, each
buffer rounded once when stored (the fallback too runs on float32 copies: halves.py).
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl as cl

from ndlite.device import ShapeError, fallbacks

from . import halves
from .array import INT32_LIMIT
from .kernels import actype, arith, slot

WEIGHT_DECAY, MOMENTUM, NESTEROV, FIRST_STEP, CENTERED, DECOUPLED, AMSGRAD = (
    1, 2, 4, 8, 16, 32, 64)


def _fusable(param, *buffers) -> bool:
    """Whether the kernels take these buffers: row-major from offset 0, of param's shape and
    dtype (None: not used), with 32-bit indices. (A loop, not all() over a generator: the
    multi-parameter steps ask this of every parameter each step.)"""
    if param.size == 0 or param.size > INT32_LIMIT:
        return False
    if param.offset != 0 or not param.contiguous:
        return False
    shape, dtype, strides = param.shape, param.dtype, param.strides
    for x in buffers:  # (param's strides: contiguous, without asking)
        if x is not None and (x.offset != 0 or x.shape != shape or x.dtype != dtype
                              or x.strides != strides and not x.contiguous):
            return False
    return True


def _defines(dtype: np.dtype) -> tuple:
    return (("IDX", "int"), ("LAYOUT_LEN", 1), ("T", actype(dtype)), *slot("P", dtype))


def _launch(b, name: str, param, buffers: list, flags: int, scalars: tuple) -> None:
    kernel = b.kernels.get("optim.cl", name, _defines(param.dtype))
    data = [(x if x is not None else param).data for x in buffers]  # unused ones: any buffer
    values = (*scalars, *(0.0,) * (9 - len(scalars)))  # the struct has 9 slots
    b._launch(kernel, param.size, (param.data, *data, np.int32(param.size), np.int32(flags),
                                   b.layout(values, arith(param.dtype).type)))


def _sgd_flags(momentum, nesterov, weight_decay) -> int:
    return ((WEIGHT_DECAY if weight_decay else 0) | (MOMENTUM if momentum else 0)
            | (NESTEROV if nesterov else 0))


def _rmsprop_flags(grad_avg, momentum_buffer, weight_decay) -> int:
    return ((WEIGHT_DECAY if weight_decay else 0) | (CENTERED if grad_avg is not None else 0)
            | (MOMENTUM if momentum_buffer is not None else 0))


def _adam_flags(max_exp_avg_sq, weight_decay, decoupled_weight_decay) -> int:
    return ((WEIGHT_DECAY if weight_decay else 0)
            | (DECOUPLED if decoupled_weight_decay else 0)
            | (AMSGRAD if max_exp_avg_sq is not None else 0))


def sgd_step(b, param, grad, momentum_buffer, lr, momentum, dampening, nesterov, weight_decay,
             first_step):
    if not _fusable(param, grad, momentum_buffer):
        return halves.core(b, fallbacks.sgd_step, param, grad, momentum_buffer, lr, momentum,
                        dampening, nesterov, weight_decay, first_step)
    flags = _sgd_flags(momentum, nesterov, weight_decay) | (FIRST_STEP if first_step else 0)
    _launch(b, "sgd_step", param, [grad, momentum_buffer], flags,
            (lr, momentum, 1 - dampening, weight_decay))


def rmsprop_step(b, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps,
                 momentum, weight_decay):
    if not _fusable(param, grad, square_avg, grad_avg, momentum_buffer):
        return halves.core(b, fallbacks.rmsprop_step, param, grad, square_avg, grad_avg,
                        momentum_buffer, lr, alpha, eps, momentum, weight_decay)
    flags = _rmsprop_flags(grad_avg, momentum_buffer, weight_decay)
    _launch(b, "rmsprop_step", param, [grad, square_avg, grad_avg, momentum_buffer], flags,
            (lr, alpha, 1 - alpha, eps, momentum, weight_decay))


def adam_step(b, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
              weight_decay, decoupled_weight_decay):
    if not _fusable(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq):
        return halves.core(b, fallbacks.adam_step, param, grad, exp_avg, exp_avg_sq,
                        max_exp_avg_sq, step, lr, beta1, beta2, eps, weight_decay,
                        decoupled_weight_decay)
    flags = _adam_flags(max_exp_avg_sq, weight_decay, decoupled_weight_decay)
    _launch(b, "adam_step", param, [grad, exp_avg, exp_avg_sq, max_exp_avg_sq], flags,
            _adam_scalars(step, lr, beta1, beta2, eps, weight_decay))


def _adam_scalars(step, lr, beta1, beta2, eps, weight_decay) -> tuple:
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    return (1 - lr * weight_decay, weight_decay, beta1, 1 - beta1, beta2, 1 - beta2,
            math.sqrt(bias_correction2), eps, lr / bias_correction1)


# ---- several parameters a launch (step_fallbacks.py's sgd_steps, rmsprop_steps, adam_steps):
# each launch costs tens of microseconds of host time on NVIDIA's driver, so a step of ten
# parameters made one launch per parameter spent most of its host time here

#: parameters a launch takes, at most: OpenCL 1.2 has no pointers in buffers, so each brings
#: its buffers as kernel arguments. 16 slots of RMSprop or Adam (5 buffers of 64-bit pointers,
#: a start and flags each; n and nine double hyperparameters) take 848 bytes of arguments,
#: under the 1024 every device takes; a device that takes fewer gets fewer slots
SLOTS = 16
#: the buffers of a slot of each multi kernel: param, grad and the state
COLUMNS = {"sgd_steps": 3, "rmsprop_steps": 5, "adam_steps": 5}
ARGUMENT_BYTES = 1024  # OpenCL's least CL_DEVICE_MAX_PARAMETER_SIZE


def _slots(b, name: str, dtype: np.dtype) -> int:
    """The most slots (SLOTS, halved while too many) whose arguments fit the device; 0: none."""
    per_slot = COLUMNS[name] * b.device.address_bits // 8 + 8
    fixed = 4 + 9 * arith(dtype).itemsize
    limit = min(ARGUMENT_BYTES, b.device.max_parameter_size)
    slots = SLOTS
    while slots and slots * per_slot + fixed > limit:
        slots //= 2
    return slots


def _multi_kernel(b, name: str, dtype: np.dtype) -> tuple:
    """(kernel, slots) of `name` for `dtype`, or (None, 0). The kernel object is this module's
    alone (b.enqueue never sees it), its argument types declared so that one set_args call
    packs them all: set one by one, its ~100 arguments would cost more than the launch."""
    built = b.__dict__.setdefault("_multi_step_kernels", {})
    hit = built.get((name, dtype))
    if hit is None:
        slots, kernel = _slots(b, name, dtype), None
        if slots:
            defines = _defines(dtype) + ((("SLOTS", slots),) if slots < SLOTS else ())
            kernel = cl.Kernel(b.kernels.program("optim.cl", defines), name)
            one = [None] * COLUMNS[name] + [np.int32, np.int32]  # buffers, start, flags
            kernel.set_scalar_arg_dtypes(one * slots + [np.int32] + [arith(dtype).type] * 9)
        hit = built[(name, dtype)] = (kernel, slots)
    return hit


def _many(b, name: str, params, columns: list, flags: list, scalars: tuple, one) -> None:
    """Update params[i] with its buffers column[i] of `columns` (grad, then the state; None:
    not used) and flags[i]: up to SLOTS a launch of `name`, one dtype at a time, and those it
    cannot take (views, sizes past 32-bit indices) by one(i). The lists' lengths and every
    buffer's shape are checked, and the kernels built, before the first update, so a failure
    there changes nothing (one inside a view's own step, an allocation, can still come after
    the parameters before it were updated)."""
    for column in (*columns, flags):
        if len(column) != len(params):
            raise ValueError(f"{name}: {len(params)} parameters but a list of {len(column)} "
                             "gradients, state buffers or flags")
    rows = list(zip(params, *columns, flags))  # (param, grad, state..., flags) each
    for row in rows:
        for x in row[1:-1]:
            if x is not None and x.shape != row[0].shape:
                raise ShapeError(f"{name}: a parameter of shape {row[0].shape} with a gradient "
                                 f"or state buffer of shape {x.shape}")
    groups: dict = {}  # dtype -> indices of the parameters the kernel takes
    rest = []
    for i, row in enumerate(rows):
        if _fusable(*row[:-1]):
            groups.setdefault(row[0].dtype, []).append(i)
        else:
            rest.append(i)
    kernels = {dtype: _multi_kernel(b, name, dtype) for dtype in groups}
    for i in rest:
        one(i)
    values = (*scalars, *(0.0,) * (9 - len(scalars)))
    for dtype, indices in groups.items():
        kernel, slots = kernels[dtype]
        if kernel is None:
            for i in indices:
                one(i)
            continue
        rounded = np.array(values, arith(dtype)).tolist()  # as `_launch`'s struct rounds them
        for chunk in _chunks([rows[i] for i in indices], slots):
            _launch_many(b, kernel, slots, chunk, rounded)


def _chunks(rows: list, slots: int):
    """`rows` cut into launches of at most `slots` parameters and INT32_LIMIT elements."""
    chunk, total = [], 0
    for row in rows:
        if len(chunk) == slots or total + row[0].size > INT32_LIMIT:
            yield chunk
            chunk, total = [], 0
        chunk.append(row)
        total += row[0].size
    if chunk:
        yield chunk


def _launch_many(b, kernel, slots: int, rows: list, scalars: list) -> None:
    """One launch over `rows`: (param, grad, state..., flags) each."""
    args, start = [], 0
    for row in rows:
        param = row[0]
        for x in row[:-1]:
            args.append((x if x is not None else param).data)  # unused ones: any buffer
        args += (start, row[-1])
        start += param.size
    unused = [*args[:len(rows[0]) - 1], start, 0]  # the first slot's buffers, no elements
    args += unused * (slots - len(rows))
    kernel.set_args(*args, start, *scalars)
    group = b.group
    cl.enqueue_nd_range_kernel(b.queue, kernel, (-(-start // group) * group,), (group,))


def sgd_steps(b, params, grads, momentum_buffers, lr, momentum, dampening, nesterov,
              weight_decay, first_steps) -> None:
    shared = _sgd_flags(momentum, nesterov, weight_decay)
    flags = [shared | (FIRST_STEP if first else 0) for first in first_steps]

    def one(i):
        sgd_step(b, params[i], grads[i], momentum_buffers[i], lr, momentum, dampening,
                 nesterov, weight_decay, first_steps[i])

    _many(b, "sgd_steps", params, [grads, momentum_buffers], flags,
          (lr, momentum, 1 - dampening, weight_decay), one)


def rmsprop_steps(b, params, grads, square_avgs, grad_avgs, momentum_buffers, lr, alpha, eps,
                  momentum, weight_decay) -> None:
    flags = [_rmsprop_flags(grad_avg, buf, weight_decay)
             for grad_avg, buf in zip(grad_avgs, momentum_buffers, strict=True)]

    def one(i):
        rmsprop_step(b, params[i], grads[i], square_avgs[i], grad_avgs[i], momentum_buffers[i],
                     lr, alpha, eps, momentum, weight_decay)

    _many(b, "rmsprop_steps", params, [grads, square_avgs, grad_avgs, momentum_buffers], flags,
          (lr, alpha, 1 - alpha, eps, momentum, weight_decay), one)


def adam_steps(b, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step, lr, beta1, beta2,
               eps, weight_decay, decoupled_weight_decay) -> None:
    flags = [_adam_flags(vmax, weight_decay, decoupled_weight_decay)
             for vmax in max_exp_avg_sqs]

    def one(i):
        adam_step(b, params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sqs[i], step,
                  lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay)

    _many(b, "adam_steps", params, [grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs], flags,
          _adam_scalars(step, lr, beta1, beta2, eps, weight_decay), one)
