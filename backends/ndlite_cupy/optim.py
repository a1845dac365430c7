"""Fused optimizer steps of the CuPy backend (protocol.py's sgd_step, rmsprop_step,
adam_step): one kernel per parameter (kernels/optim.cu), updating the parameter and its state
in place, bit for bit as the reference does (fallbacks.py).

Hyperparameters are computed here on the host, as doubles, exactly as the reference computes
them. Eagerly they are kernel arguments. While a CUDA graph is being recorded (graph.py) they
go to a slot of the capture's hyperparameter table instead (the backend's `_optimizer_table`),
which the kernel reads from device memory: before each replay the table is refilled (a
learning-rate schedule, Adam's step count), so a replayed step uses the values an eager step
would. In the table's "scalars only" pass (the optimizers' Python side run before a replay)
nothing is launched: the values are only written.

Buffers that are not contiguous (the kernels index them flat) take the reference fallback,
eagerly; in a captured step they are an error, since the fallback would freeze the
hyperparameters into the graph (and run again, outside it, in each scalars-only pass).
"""

from __future__ import annotations

import math

import cupy
import numpy as np

from ndlite.device import fallbacks, step_fallbacks

from .kernels import launch, raw
from .nn import FLOATS


def _fused(b, kernel: str, param, grad, state: tuple, hyper: tuple, extra: tuple = ()) -> bool:
    """Run `kernel` over param; False when the buffers are not ones it can take."""
    table = b._optimizer_table  # while a graph is recorded or prepared for a replay
    if param.dtype not in FLOATS or not param.flags.c_contiguous or any(
            s is not None and not s.flags.c_contiguous for s in state):
        if table is not None:
            raise ValueError(f"ndlite.cuda.capture: {kernel[4:]} of a {param.dtype} parameter "
                             f"of shape {param.shape} (or its state) that the fused kernel "
                             "cannot take (float32/float64, contiguous) cannot be captured")
        return False
    slot = None  # eagerly the kernel takes the hyperparameters as arguments
    if table is not None:
        slot = table.hyperparameters(hyper)  # the device slot the recorded kernel reads
        if slot is None:  # the scalars-only pass before a replay: the graph launches it
            return True
    grad = cupy.ascontiguousarray(grad, dtype=param.dtype)
    function = raw("optim").get(kernel, FLOATS[param.dtype])
    launch(function, param.size, (param, grad, *state, slot, *(np.float64(h) for h in hyper),
                                  *extra, np.int64(param.size)))
    return True


def sgd_step(b, param, grad, momentum_buffer, lr, momentum, dampening, nesterov, weight_decay,
             first_step):
    buf = momentum_buffer if momentum else None
    hyper = (lr, weight_decay, momentum, 1 - dampening, float(nesterov), float(first_step))
    if not _fused(b, "ndl_sgd_step", param, grad, (buf,), hyper):
        fallbacks.sgd_step(b, param, grad, momentum_buffer, lr, momentum, dampening, nesterov,
                           weight_decay, first_step)


def rmsprop_step(b, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps,
                 momentum, weight_decay):
    hyper = (lr, alpha, 1 - alpha, eps, momentum, weight_decay)
    if not _fused(b, "ndl_rmsprop_step", param, grad, (square_avg, grad_avg, momentum_buffer),
                  hyper):
        fallbacks.rmsprop_step(b, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha,
                               eps, momentum, weight_decay)


def _adam_hyper(step, lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay) -> tuple:
    """ndl_adam_at's h, on the host in doubles as the reference computes them."""
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    return (1 - lr * weight_decay, 0.0 if decoupled_weight_decay else weight_decay, beta1,
            1 - beta1, beta2, 1 - beta2, math.sqrt(bias_correction2), lr / bias_correction1, eps)


def adam_step(b, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
              weight_decay, decoupled_weight_decay):
    decoupled = bool(weight_decay and decoupled_weight_decay)
    hyper = _adam_hyper(step, lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay)
    if not _fused(b, "ndl_adam_step", param, grad, (exp_avg, exp_avg_sq, max_exp_avg_sq), hyper,
                  (np.bool_(decoupled),)):
        fallbacks.adam_step(b, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1,
                            beta2, eps, weight_decay, decoupled_weight_decay)


# ---- several parameters in one launch (step_fallbacks.py's sgd_steps, rmsprop_steps, adam_steps)

#: elements of one parameter a block of the multi-parameter kernels updates
CHUNK = 4096
#: device plans of recent multi-parameter launches, keyed by all they hold (the kernel, the
#: device, every buffer's address, the sizes and flags): a training loop's parameters, states
#: and gradients come back at the same addresses step after step (CuPy's pool), so a plan is
#: built and copied to the device once, not each step (its NumPy build and upload cost about
#: 80 us of host time on the H100 host: a fifth of the seed CNN's optimizer and loss calls)
_PLANS: dict = {}
PLANS_KEPT = 8


def _plan(key: tuple, columns: list, sizes: list, flags) -> tuple:
    """(device plan, blocks) for the buffers of `columns` (one list per field, a buffer's
    address or 0 each); cached under `key`."""
    hit = _PLANS.pop(key, None)
    if hit is not None:
        _PLANS[key] = hit  # the most recently used last: the first is evicted
        return hit
    sizes = np.array(sizes, dtype=np.int64)
    table = np.column_stack([np.array(columns, dtype=np.int64).T, sizes] +
                            ([] if flags is None else [np.array(flags, dtype=np.int64)]))
    blocks = -(-sizes // CHUNK)
    which = np.repeat(np.arange(len(sizes), dtype=np.int64), blocks)
    starts = (np.arange(which.size, dtype=np.int64) - np.repeat(np.cumsum(blocks) - blocks,
                                                                 blocks)) * CHUNK
    plan = cupy.asarray(np.concatenate([table.ravel(), np.column_stack([which, starts]).ravel()]))
    if len(_PLANS) >= PLANS_KEPT:
        del _PLANS[next(iter(_PLANS))]  # the least recently used
    _PLANS[key] = hit = (plan, int(which.size))
    return hit


def _many(b, kernel: str, params, grads, states: tuple, hyper: tuple, flags=None,
          extra: tuple = ()) -> bool:
    """Launch `kernel` once over every parameter of the list; False (nothing launched) where
    the one-parameter path must run: while a graph records or a scalars-only pass runs (the
    hyperparameter table is per parameter), or for buffers the kernels cannot take."""
    if b._optimizer_table is not None or not params:
        return False
    dtype = params[0].dtype
    if dtype not in FLOATS:
        return False
    grads = [cupy.ascontiguousarray(g, dtype=dtype) for g in grads]  # (kept until launched)
    columns = []
    for column in (params, grads, *states):
        addresses = []
        for a in column:
            if a is None:
                addresses.append(0)
            elif a.dtype != dtype or not a.flags.c_contiguous:
                return False
            else:
                addresses.append(a.data.ptr)
        columns.append(addresses)
    sizes = [p.size for p in params]
    key = (kernel, dtype.char, cupy.cuda.runtime.getDevice(),
           *(x for addresses in columns for x in addresses), *sizes,
           *(() if flags is None else flags))
    plan, blocks = _plan(key, columns, sizes, flags)
    function = raw("optim").get(kernel, FLOATS[dtype])
    function((blocks,), (256,), (plan, np.int64(len(params)), np.int64(CHUNK),
                                 *(np.float64(h) for h in hyper), *extra))
    return True


def sgd_steps(b, params, grads, momentum_buffers, lr, momentum, dampening, nesterov,
              weight_decay, first_steps):
    bufs = [buf if momentum else None for buf in momentum_buffers]
    hyper = (lr, weight_decay, momentum, 1 - dampening, float(nesterov))
    if not _many(b, "ndl_sgd_steps", params, grads, (bufs,), hyper,
                 [bool(f) for f in first_steps]):
        step_fallbacks.sgd_steps(b, params, grads, momentum_buffers, lr, momentum, dampening,
                                 nesterov, weight_decay, first_steps)


def rmsprop_steps(b, params, grads, square_avgs, grad_avgs, momentum_buffers, lr, alpha, eps,
                  momentum, weight_decay):
    hyper = (lr, alpha, 1 - alpha, eps, momentum, weight_decay)
    if not _many(b, "ndl_rmsprop_steps", params, grads,
                 (square_avgs, grad_avgs, momentum_buffers), hyper):
        step_fallbacks.rmsprop_steps(b, params, grads, square_avgs, grad_avgs,
                                     momentum_buffers, lr, alpha, eps, momentum, weight_decay)


def adam_steps(b, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step, lr, beta1, beta2,
               eps, weight_decay, decoupled_weight_decay):
    decoupled = bool(weight_decay and decoupled_weight_decay)
    if not _many(b, "ndl_adam_steps", params, grads, (exp_avgs, exp_avg_sqs, max_exp_avg_sqs),
                 _adam_hyper(step, lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay),
                 extra=(np.bool_(decoupled),)):
        step_fallbacks.adam_steps(b, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step,
                                  lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay)
