"""Fallbacks of the batch-norm fast paths of the contract (protocol.py, FAST_PATHS), composed
from the primitives: they are the specification a backend's kernels must meet, within the
tolerance policy. An override may sum in another order (per chunk of a channel, then the
chunks), but one fixed by the shape alone: no atomics, the same bits run to run.

Conventions: x is float, of shape (N, C, *) (any trailing dims, none included); a channel is
dim 1 and its M = N * prod(*) values are normalized together. Each function takes the
backend `b` first and returns new buffers.
- batch_norm(x, weight (C,) | None, bias (C,) | None, eps) -> (y, mean (C,), invstd (C,),
  var (C,)): mean and the biased variance of each channel, invstd = 1 / sqrt(var + eps),
  y = (x - mean) * invstd * weight + bias. var is what the running statistics need (their
  unbiased variance is var * M / (M - 1)); it comes from the same pass, not from invstd.
  For halves, mean, invstd and var stay float32 (as PyTorch keeps them; halfmath).
- batch_norm_grad(grad (N, C, *), x, weight | None, mean, invstd, bias) -> (grad_x,
  grad_weight | None, grad_bias | None): with xhat = (x - mean) * invstd, the per-channel
  sums sum_dy = sum(grad) and sum_dy_xhat = sum(grad * xhat), grad_x = invstd * weight *
  (grad - sum_dy / M - xhat * sum_dy_xhat / M), grad_weight = sum_dy_xhat (when weight is
  given), grad_bias = sum_dy (when `bias`, a bool, says the forward had one).
- batch_norm_update(running_mean, running_var, mean, var, momentum, count) -> None: in place,
  running_mean = running_mean * (1 - momentum) + mean * momentum and running_var =
  running_var * (1 - momentum) + (var * (count / (count - 1))) * momentum, each product and
  sum rounded in the running buffers' dtype in that order (the Python numbers cast to it
  first), so an override gives the same bits; mean and var as batch_norm returned them (float32
  for halves), cast to the running dtype after their product with momentum. One call per
  BatchNorm layer and step instead of eleven tensor ops.
"""

from __future__ import annotations

import math
import sys


def channel_axes(x) -> tuple:
    """The axes a channel's values lie along: 0 and every trailing one."""
    return (0,) + tuple(range(2, len(x.shape)))


def per_channel(x) -> tuple:
    """The shape (1, C, 1, ...) a (C,) vector broadcasts against x with."""
    return (1, x.shape[1]) + (1,) * (len(x.shape) - 2)


def count(x) -> int:
    """M, the values of one channel."""
    return math.prod(x.shape) // max(x.shape[1], 1)


def batch_norm(b, x, weight, bias, eps):
    c, m, axes, shape = x.shape[1], count(x), channel_axes(x), per_channel(x)
    mean = b.div(b.sum(x, axes, True), m)
    centered = b.sub(x, mean)
    var = b.div(b.sum(b.mul(centered, centered), axes, True), m)
    invstd = b.div(1, b.sqrt(b.add(var, eps)))
    y = b.mul(centered, invstd)
    if weight is not None:
        y = b.mul(y, b.reshape(weight, shape))
    if bias is not None:
        y = b.add(y, b.reshape(bias, shape))
    return y, b.reshape(mean, (c,)), b.reshape(invstd, (c,)), b.reshape(var, (c,))


def batch_norm_grad(b, grad, x, weight, mean, invstd, bias):
    c, m, axes, shape = x.shape[1], count(x), channel_axes(x), per_channel(x)
    invstd = b.reshape(invstd, shape)
    xhat = b.mul(b.sub(x, b.reshape(mean, shape)), invstd)
    sum_dy = b.sum(grad, axes, True)
    sum_dy_xhat = b.sum(b.mul(grad, xhat), axes, True)
    scale = invstd if weight is None else b.mul(invstd, b.reshape(weight, shape))
    inner = b.sub(b.sub(grad, b.div(sum_dy, m)), b.mul(xhat, b.div(sum_dy_xhat, m)))
    grad_x = b.mul(inner, scale)
    grad_weight = None if weight is None else b.reshape(sum_dy_xhat, (c,))
    grad_bias = b.reshape(sum_dy, (c,)) if bias else None
    return grad_x, grad_weight, grad_bias


def batch_norm_update(b, running_mean, running_var, mean, var, momentum, count):
    keep = 1 - momentum
    new_mean = b.mul(mean, momentum)
    new_var = b.mul(b.mul(var, count / (count - 1)), momentum)
    if new_mean.dtype != running_mean.dtype:
        new_mean = b.astype(new_mean, running_mean.dtype)
    if new_var.dtype != running_var.dtype:
        new_var = b.astype(new_var, running_var.dtype)
    b.assign(running_mean, b.add(b.mul(running_mean, keep), new_mean))
    b.assign(running_var, b.add(b.mul(running_var, keep), new_var))


class NormPaths:
    """The batch-norm fast paths, mixed into the Backend base class. Each calls the function
    of its name in `_norm_kernels`: this module (the fallbacks) unless a backend names its own
    module of kernels (ndlite_cupy/norm.py, ndlite_opencl/norm.py), whose functions take the
    backend first, as these do."""

    _norm_kernels = sys.modules[__name__]

    def batch_norm(self, x, weight, bias, eps):
        return self._norm_kernels.batch_norm(self, x, weight, bias, eps)

    def batch_norm_grad(self, grad, x, weight, mean, invstd, bias):
        return self._norm_kernels.batch_norm_grad(self, grad, x, weight, mean, invstd, bias)

    def batch_norm_update(self, running_mean, running_var, mean, var, momentum, count):
        # a module of kernels without its own update (numpy's, opencl's) takes this one
        update = getattr(self._norm_kernels, "batch_norm_update", batch_norm_update)
        update(self, running_mean, running_var, mean, var, momentum, count)
