"""The CuPy backend's layer paths (step_fallbacks.py: conv2d_bias, linear_grad,
log_softmax_grad), each one backend call where the composed fallback makes two to six, so a
training step spends less host time per layer (each call costs tens of microseconds of Python
and launch on the host: `python bench/host_split.py --backend cupy` times them; on the H100
host, bench/results/host_split_seed_h100.txt):

- conv2d_bias: the convolution, then the bias added in place into its fresh output by one
  launch of ndl_channel_bias (conv.cu), and the ReLU after it when asked: the fallback's
  reshape, broadcast add and relu, one rounding each way, so the same bits;
- linear_grad: the fallback's products of 2-D operands (the transposed one read in place by
  flag, as the fallback's permuted view is) and the bias sum, without the reshape and permute
  calls: the same bits;
- log_softmax_grad: one thread per row (ndl_log_softmax_grad, loss.cu), the row's sum in
  double as the backend's sum takes it, exp, product and difference each rounded; a few long
  rows take the fallback, whose passes spread over the device.

Halves, empty arrays and other layouts take the fallback.
"""

from __future__ import annotations

import math

import cupy
import numpy as np

from ndlite.device import step_fallbacks

from .kernels import launch, raw
from .nn import FLOATS, _covered, _index


def conv2d_bias(b, x, weight, bias, stride, padding, dilation, groups, relu=False):
    out = b.conv2d(x, weight, stride, padding, dilation, groups)
    if not (_covered(out) and bias.dtype == out.dtype and out.flags.c_contiguous
            and bias.shape == (out.shape[1],)):
        out = b.add(out, b.reshape(bias, (1, bias.shape[0], 1, 1)))
        return b.relu(out) if relu else out
    channels = out.shape[1]
    index, cast = _index(out.size)
    launch(raw("conv").get("ndl_channel_bias", FLOATS[out.dtype], index), out.size,
           (out, cupy.ascontiguousarray(bias), cast(out.size), cast(channels),
            cast(out.size // (out.shape[0] * channels)), np.int32(relu)))
    return out


def linear_grad(b, grad, x, weight, needs) -> tuple:
    if grad.ndim != 2 or x.ndim != 2 or not _covered(grad, x, weight):
        return step_fallbacks.linear_grad(b, grad, x, weight, needs)
    return (b.matmul(grad, weight) if needs[0] else None,
            b.matmul(grad.T, x) if needs[1] else None,
            b.sum(grad, (0,), False) if needs[2] else None)


#: rows at least this long, fewer than LONG_ROWS of them: the fallback's parallel passes
LONG_ROW, LONG_ROWS = 512, 1024


def log_softmax_grad(b, grad, out, axis):
    length = out.shape[axis] if out.shape else 0
    rows = out.size // length if length else 0
    if (not _covered(grad, out) or grad.dtype != out.dtype or grad.shape != out.shape
            or (length >= LONG_ROW and rows < LONG_ROWS)):
        return step_fallbacks.log_softmax_grad(b, grad, out, axis)
    grad, out = cupy.ascontiguousarray(grad), cupy.ascontiguousarray(out)
    result = cupy.empty(out.shape, dtype=out.dtype)
    index, cast = _index(out.size)
    launch(raw("loss").get("ndl_log_softmax_grad", FLOATS[out.dtype], index), rows,
           (grad, out, result, cast(rows), cast(length), cast(math.prod(out.shape[axis + 1:]))))
    return result
