"""The OpenCL backend's layer paths (step_fallbacks.py: conv2d_bias and log_softmax_grad; its
linear_grad is the fallback's), each one backend call where the fallback makes two or four,
so a training step spends less host time per layer:

- conv2d_bias: the convolution, then the bias added in place into its fresh output (the add
  map kernel of elementwise.cl, written over its first operand), and the ReLU after it when
  asked (in place too): the fallback's bits;
- log_softmax_grad: one work-item per row (softmax.cl), the row's sum compensated, exp,
  product and difference each rounded. Few long rows (log_softmax's own threshold) take the
  fallback, whose passes spread over the device.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import step_fallbacks

from .array import INT32_LIMIT
from .elementwise import apply
from .kernels import actype, slot
from .nn import LONG_ROW

linear_grad = step_fallbacks.linear_grad


def conv2d_bias(b, x, weight, bias, stride, padding, dilation, groups, relu=False):
    out = b.conv2d(x, weight, stride, padding, dilation, groups)
    channels = b.reshape(bias, (1, bias.shape[0], 1, 1))
    if not (out.contiguous and out.offset == 0 and bias.dtype == out.dtype):
        out = b.add(out, channels)
        return b.relu(out) if relu else out
    apply(b, "ADD", [out, channels], out.dtype, out=out, in_dtype=out.dtype)
    return apply(b, "RELU", [out], out.dtype, out=out, in_dtype=out.dtype) if relu else out


def log_softmax_grad(b, grad, out, axis):
    length = out.shape[axis] if out.shape else 0
    rows = out.size // length if length else 0
    if (not rows or out.size > INT32_LIMIT or grad.dtype != out.dtype
            or grad.shape != out.shape or (length >= LONG_ROW and rows < 4 * b.compute_units)):
        return step_fallbacks.log_softmax_grad(b, grad, out, axis)
    grad = grad if grad.contiguous and grad.offset == 0 else b.copy(grad)
    out = out if out.contiguous and out.offset == 0 else b.copy(out)
    result = b._new(out.shape, out.dtype, "log_softmax_grad")
    defines = (("IDX", "int"), ("LAYOUT_LEN", 3), ("T", actype(out.dtype)),
               *slot("P", out.dtype), ("WG", b.group))
    kernel = b.kernels.get("softmax.cl", "log_softmax_grad_rows", defines)
    layout = b.layout((rows, length, prod(out.shape[axis + 1:])), np.int32)
    b._launch(kernel, rows, (result.data, grad.data, out.data, layout))
    return result
