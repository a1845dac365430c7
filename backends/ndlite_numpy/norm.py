"""The batch-norm fast paths of the NumPy backend (protocol.py; the specification is
ndlite/device/norm_fallbacks.py), in a few whole-array NumPy passes.

x (N, C, *) is seen as (N, C, S), S the trailing dims' size, so that every per-channel sum is
a sum over the contiguous last axis (NumPy's pairwise summation) and then over N: no strided
multi-axis reduction, no (N, C, S) temporaries beyond the result and one centered copy.
- batch_norm: sum -> mean; centered = x - mean (the result buffer); the sum of squares by an
  einsum over the centered values; then the result scaled and shifted in place.
- batch_norm_grad: sum(grad) and sum(grad * (x - mean)) per channel (an einsum again), then
  grad_x = grad * k1 - (x - mean) * k2 - k3 with per-channel k's, in place on one buffer.
Sums run in the input's dtype (float32 for float32, float64 for float64; halves come here as
float32 through halfmath, which keeps mean, invstd and var float32). NumPy's order is fixed
by the shape: the same bits run to run. Empty inputs take the fallbacks.
"""

from __future__ import annotations

import numpy as np

from ndlite.device import norm_fallbacks as nfb

from . import norm_kernels


def _three(x: np.ndarray) -> np.ndarray:
    """x (N, C, *) as a C-contiguous (N, C, S)."""
    n, c = x.shape[0], x.shape[1]
    return np.ascontiguousarray(x).reshape(n, c, -1)


def _column(v: np.ndarray) -> np.ndarray:
    return v.reshape(1, -1, 1)


def _channel_sum(x3: np.ndarray) -> np.ndarray:
    """(C,): the sum over S, then over N."""
    return np.add.reduce(np.add.reduce(x3, axis=2), axis=0)


def _channel_dot(a3: np.ndarray, b3: np.ndarray) -> np.ndarray:
    """(C,): sum of a * b over N and S, each (n, c) row a dot product."""
    return np.add.reduce(np.einsum("ncs,ncs->nc", a3, b3), axis=0)


def batch_norm(b, x, weight, bias, eps):
    if x.size == 0:
        return nfb.batch_norm(b, x, weight, bias, eps)
    x3 = _three(x)
    if norm_kernels.applies(x3, *(v for v in (weight, bias) if v is not None)):
        y, mean, invstd, var = norm_kernels.batch_norm(x3, weight, bias, eps)
        return y.reshape(x.shape), mean, invstd, var
    dtype, m = x3.dtype, x3.shape[0] * x3.shape[2]
    mean = _channel_sum(x3) / dtype.type(m)
    y = np.subtract(x3, _column(mean))
    var = _channel_dot(y, y) / dtype.type(m)
    invstd = dtype.type(1) / np.sqrt(var + dtype.type(eps))
    scale = invstd if weight is None else invstd * weight
    np.multiply(y, _column(scale), out=y)
    if bias is not None:
        np.add(y, _column(bias), out=y)
    return y.reshape(x.shape), mean, invstd, var


def batch_norm_grad(b, grad, x, weight, mean, invstd, bias):
    if x.size == 0:
        return nfb.batch_norm_grad(b, grad, x, weight, mean, invstd, bias)
    x3, g3 = _three(x), _three(grad)
    if norm_kernels.applies(x3, g3, *(() if weight is None else (weight,))):
        grad_x, sum_dy_xhat, sum_dy = norm_kernels.batch_norm_grad(g3, x3, weight, mean, invstd)
        return (grad_x.reshape(x.shape), None if weight is None else sum_dy_xhat,
                sum_dy if bias else None)
    dtype, m = x3.dtype, x3.shape[0] * x3.shape[2]
    mean, invstd = mean.astype(dtype, copy=False), invstd.astype(dtype, copy=False)
    centered = np.subtract(x3, _column(mean))
    sum_dy = _channel_sum(g3)
    sum_dy_xhat = _channel_dot(g3, centered) * invstd
    k1 = invstd if weight is None else invstd * weight
    k2 = k1 * invstd * sum_dy_xhat / dtype.type(m)
    k3 = k1 * sum_dy / dtype.type(m)
    np.multiply(centered, _column(k2), out=centered)
    grad_x = np.multiply(g3, _column(k1))
    np.subtract(grad_x, centered, out=grad_x)
    np.subtract(grad_x, _column(k3), out=grad_x)
    grad_weight = None if weight is None else sum_dy_xhat
    return grad_x.reshape(x.shape), grad_weight, (sum_dy if bias else None)
