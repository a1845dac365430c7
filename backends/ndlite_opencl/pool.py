"""max_pool2d (with indices), avg_pool2d and their gradients with kernels/pool.cl.

One work-item per output element forward; backward, one per input element gathering over the
windows that cover it (no atomics). The four kernels share one program per dtype.
"""

from __future__ import annotations

import numpy as np

from ndlite.device import fallbacks

from .array import INT32_LIMIT, CLArray, numel
from .kernels import ctype

_INT64 = np.dtype("int64")


def max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode):
    if _too_large(x.shape):
        return fallbacks.max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode)
    out_shape, layout = _geometry(b, x.shape, kernel_size, stride, padding, dilation, ceil_mode,
                                  count=True)
    values = b._new(out_shape, x.dtype, "max_pool2d")
    indices = b._new(out_shape, _INT64, "max_pool2d")
    if values.size:
        _launch(b, "max_pool", x.dtype, values.size, layout,
                (values.data, indices.data, _dense(b, x).data))
    return values, indices


def max_pool2d_grad(b, grad_output, indices, input_shape, kernel_size, stride, padding,
                    dilation, ceil_mode):
    if _too_large(input_shape):
        return fallbacks.max_pool2d_grad(b, grad_output, indices, input_shape, kernel_size,
                                         stride, padding, dilation, ceil_mode)
    _, layout = _geometry(b, input_shape, kernel_size, stride, padding, dilation, ceil_mode,
                          count=False)
    out = b._new(tuple(input_shape), grad_output.dtype, "max_pool2d_grad")
    if out.size:
        _launch(b, "max_pool_grad", out.dtype, out.size, layout,
                (out.data, _dense(b, grad_output).data, _dense(b, indices).data))
    return out


def avg_pool2d(b, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    if _too_large(x.shape):
        return fallbacks.avg_pool2d(b, x, kernel_size, stride, padding, ceil_mode,
                                    count_include_pad)
    out_shape, layout = _geometry(b, x.shape, kernel_size, stride, padding, (1, 1), ceil_mode,
                                  count=True, count_include_pad=count_include_pad)
    out = b._new(out_shape, x.dtype, "avg_pool2d")
    if out.size:
        _launch(b, "avg_pool", x.dtype, out.size, layout, (out.data, _dense(b, x).data))
    return out


def avg_pool2d_grad(b, grad_output, input_shape, kernel_size, stride, padding, ceil_mode,
                    count_include_pad):
    if _too_large(input_shape):
        return fallbacks.avg_pool2d_grad(b, grad_output, input_shape, kernel_size, stride,
                                         padding, ceil_mode, count_include_pad)
    _, layout = _geometry(b, input_shape, kernel_size, stride, padding, (1, 1), ceil_mode,
                          count=False, count_include_pad=count_include_pad)
    out = b._new(tuple(input_shape), grad_output.dtype, "avg_pool2d_grad")
    if out.size:
        _launch(b, "avg_pool_grad", out.dtype, out.size, layout,
                (out.data, _dense(b, grad_output).data))
    return out


def _too_large(shape) -> bool:
    """The kernels index with 32-bit ints (an output is never larger than its input, except
    by ceil_mode's last window: a margin covers it)."""
    return 4 * numel(tuple(shape)) > INT32_LIMIT


def _geometry(b, shape, kernel_size, stride, padding, dilation, ceil_mode, count,
              count_include_pad=False):
    """The output shape and the kernel layout; `count`: one work-item per output (else per
    input element)."""
    n, c, h, w = shape
    oh, ow = (fallbacks.pool_output_size(s, k, st, p, d, ceil_mode) for s, k, st, p, d in
              zip((h, w), kernel_size, stride, padding, dilation, strict=True))
    out_shape = (n, c, oh, ow)
    items = n * c * oh * ow if count else n * c * h * w
    layout = b.layout((items, h, w, oh, ow, *kernel_size, *stride, *padding, *dilation,
                       int(count_include_pad)), np.int32)
    return out_shape, layout


def _launch(b, name: str, dtype: np.dtype, items: int, layout, buffers: tuple) -> None:
    defines = (("IDX", "int"), ("LAYOUT_LEN", 14), ("T", ctype(dtype)))
    b._launch(b.kernels.get("pool.cl", name, defines), items, (*buffers, layout))


def _dense(b, x: CLArray) -> CLArray:
    return x if x.contiguous and x.offset == 0 else b.copy(x)
