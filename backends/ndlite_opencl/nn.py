"""The neural-network fast paths of the OpenCL backend, beside convolution (conv.py):
pooling (kernels/pool.cl), log_softmax (kernels/softmax.cl) and the unweighted nll_loss
(kernels/loss.cl).

- max_pool2d (with indices), avg_pool2d: one work-item per output element; their gradients
  one per input element, gathering over the windows that cover it (no atomics). The four
  kernels share one program per dtype.
- log_softmax along one axis: one pass per row for the max, one for the compensated sum of
  exponentials, one to write, all in one launch.
- nll_loss and its gradient: one launch each ("mean"'s gradient: two), instead of the
  fallback's gather, comparisons, casts, products and sums.
Sizes past 32-bit indexing take the fallbacks. Every function takes the backend `b` first.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import fallbacks

from . import halves
from .array import INT32_LIMIT, CLArray, numel
from .kernels import actype, arith, ctype, slot

_INT64 = np.dtype("int64")
#: rows at least this long, when there are too few to fill the device, get a work-group each
LONG_ROW = 512
_REDUCTIONS = {"none": 0, "sum": 0, "mean": 1}


# ---- pooling ---------------------------------------------------------------------------------


def max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode):
    if _too_large(x.shape):
        return fallbacks.max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode)
    out_shape, layout = _geometry(b, x.shape, kernel_size, stride, padding, dilation, ceil_mode,
                                  count=True)
    values = b._new(out_shape, x.dtype, "max_pool2d")
    indices = b._new(out_shape, _INT64, "max_pool2d")
    if values.size:
        _pool_launch(b, "max_pool", x.dtype, values.size, layout,
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
        _pool_launch(b, "max_pool_grad", out.dtype, out.size, layout,
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
        _pool_launch(b, "avg_pool", x.dtype, out.size, layout, (out.data, _dense(b, x).data))
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
        _pool_launch(b, "avg_pool_grad", out.dtype, out.size, layout,
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


def _pool_launch(b, name: str, dtype: np.dtype, items: int, layout, buffers: tuple) -> None:
    defines = (("IDX", "int"), ("LAYOUT_LEN", 14), ("T", ctype(dtype)))
    b._launch(b.kernels.get("pool.cl", name, defines), items, (*buffers, layout))


# ---- log_softmax -----------------------------------------------------------------------------


def log_softmax(b, x, axis: int):
    if x.size == 0 or x.size > INT32_LIMIT:
        return halves.core(b, fallbacks.log_softmax, x, axis)
    if not (x.contiguous and x.offset == 0):
        x = b.copy(x)
    length = x.shape[axis]
    inner = prod(x.shape[axis + 1:])
    rows = x.size // length
    out = b._new(x.shape, x.dtype, "log_softmax")
    layout = b.layout((rows, length, inner), np.int32)
    defines = (("IDX", "int"), ("LAYOUT_LEN", 3), ("T", actype(x.dtype)), *slot("P", x.dtype),
               ("WG", b.group))
    if length >= LONG_ROW and rows < 4 * b.compute_units and b.group >= 32:
        kernel = b.kernels.get("softmax.cl", "log_softmax_group", defines)
        b.enqueue(kernel, (rows * b.group,), (b.group,), (out.data, x.data, layout))
    else:
        b._launch(b.kernels.get("softmax.cl", "log_softmax_rows", defines), rows,
                  (out.data, x.data, layout))
    return out


# ---- nll_loss --------------------------------------------------------------------------------


def nll_loss(b, input: CLArray, target: CLArray, ignore_index: int, reduction: str):
    n, c = input.shape
    if n * c > INT32_LIMIT or n == 0:
        return halves.core(b, fallbacks.nll_loss, input, target, ignore_index, reduction)
    x, labels = _dense(b, input), _dense(b, target)
    layout = b.layout((n, c, 0, _REDUCTIONS[reduction], 0), np.int32)
    args = (x.data, labels.data, np.int64(ignore_index), layout)
    if reduction == "none":
        out = b._new((n,), input.dtype, "nll_loss")
        b._launch(_loss_kernel(b, "nll_rows", input.dtype), n, (out.data, *args))
        return out
    out = b._new((), input.dtype, "nll_loss")
    group = _group(b)
    b.enqueue(_loss_kernel(b, "nll_total", input.dtype), (group,), (group,), (out.data, *args))
    return out


def nll_loss_grad(b, grad_output: CLArray, target: CLArray, classes: int, ignore_index: int,
                  reduction: str):
    n = target.shape[0]
    if n * classes > INT32_LIMIT or n == 0:
        return halves.core(b, fallbacks.nll_loss_grad, grad_output, target, classes,
                           ignore_index, reduction)
    dtype = grad_output.dtype
    g, labels = _dense(b, grad_output), _dense(b, target)
    layout = b.layout((n, classes, 0, _REDUCTIONS[reduction], int(reduction == "none")),
                      np.int32)
    count = g  # read only by "mean"
    if reduction == "mean":
        count = b._new((), arith(dtype), "nll_loss_grad")  # (float32 for halves)
        group = _group(b)
        b.enqueue(_loss_kernel(b, "nll_count", dtype), (group,), (group,),
                  (count.data, labels.data, np.int64(ignore_index), layout))
    out = b._new((n, classes), dtype, "nll_loss_grad")
    b._launch(_loss_kernel(b, "nll_grad", dtype), n * classes,
              (out.data, g.data, labels.data, count.data, np.int64(ignore_index), layout))
    return out


def _group(b) -> int:
    """One work-group does a whole batch's sum: a GPU's full group, a CPU's one item (a CPU
    runs a group's items in turn, so more only add barriers)."""
    return b.group if b.is_gpu else 1


def _loss_kernel(b, name: str, dtype: np.dtype):
    return b.kernels.get("loss.cl", name, (("IDX", "int"), ("LAYOUT_LEN", 5),
                                           ("T", actype(dtype)), *slot("P", dtype),
                                           ("WG", _group(b))))


def _dense(b, x: CLArray) -> CLArray:
    return x if x.contiguous and x.offset == 0 else b.copy(x)
