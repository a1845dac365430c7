"""nll_loss and its gradient with kernels/loss.cl: one launch each ("mean"'s gradient: two),
instead of the fallback's gather, comparisons, casts, products and sums."""

from __future__ import annotations

import numpy as np

from ndlite.device import fallbacks

from .array import INT32_LIMIT, CLArray
from .kernels import ctype

_REDUCTIONS = {"none": 0, "sum": 0, "mean": 1}


def nll_loss(b, input: CLArray, target: CLArray, ignore_index: int, reduction: str):
    n, c = input.shape
    if n * c > INT32_LIMIT or n == 0:
        return fallbacks.nll_loss(b, input, target, ignore_index, reduction)
    x, labels = _dense(b, input), _dense(b, target)
    layout = b.layout((n, c, 0, _REDUCTIONS[reduction], 0), np.int32)
    args = (x.data, labels.data, np.int64(ignore_index), layout)
    if reduction == "none":
        out = b._new((n,), input.dtype, "nll_loss")
        b._launch(_kernel(b, "nll_rows", input.dtype), n, (out.data, *args))
        return out
    out = b._new((), input.dtype, "nll_loss")
    group = _group(b)
    b.enqueue(_kernel(b, "nll_total", input.dtype), (group,), (group,), (out.data, *args))
    return out


def nll_loss_grad(b, grad_output: CLArray, target: CLArray, classes: int, ignore_index: int,
                  reduction: str):
    n = target.shape[0]
    if n * classes > INT32_LIMIT or n == 0:
        return fallbacks.nll_loss_grad(b, grad_output, target, classes, ignore_index,
                                       reduction)
    dtype = grad_output.dtype
    g, labels = _dense(b, grad_output), _dense(b, target)
    layout = b.layout((n, classes, 0, _REDUCTIONS[reduction], int(reduction == "none")),
                      np.int32)
    count = g  # read only by "mean"
    if reduction == "mean":
        count = b._new((), dtype, "nll_loss_grad")
        group = _group(b)
        b.enqueue(_kernel(b, "nll_count", dtype), (group,), (group,),
                  (count.data, labels.data, np.int64(ignore_index), layout))
    out = b._new((n, classes), dtype, "nll_loss_grad")
    b._launch(_kernel(b, "nll_grad", dtype), n * classes,
              (out.data, g.data, labels.data, count.data, np.int64(ignore_index), layout))
    return out


def _group(b) -> int:
    """One work-group does a whole batch's sum: a GPU's full group, a CPU's one item (a CPU
    runs a group's items in turn, so more only add barriers)."""
    return b.group if b.is_gpu else 1


def _kernel(b, name: str, dtype: np.dtype):
    return b.kernels.get("loss.cl", name, (("IDX", "int"), ("LAYOUT_LEN", 5),
                                           ("T", ctype(dtype)), ("WG", _group(b))))


def _dense(b, x: CLArray) -> CLArray:
    return x if x.contiguous and x.offset == 0 else b.copy(x)
