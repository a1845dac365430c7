"""log_softmax along one axis with kernels/softmax.cl: one pass per row for the max, one for
the compensated sum of exponentials, one to write, all in one launch."""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import fallbacks

from .array import INT32_LIMIT
from .kernels import ctype

#: rows at least this long, when there are too few to fill the device, get a work-group each
LONG_ROW = 512


def log_softmax(b, x, axis: int):
    if x.size == 0 or x.size > INT32_LIMIT:
        return fallbacks.log_softmax(b, x, axis)
    if not (x.contiguous and x.offset == 0):
        x = b.copy(x)
    length = x.shape[axis]
    inner = prod(x.shape[axis + 1:])
    rows = x.size // length
    out = b._new(x.shape, x.dtype, "log_softmax")
    layout = b.layout((rows, length, inner), np.int32)
    defines = (("IDX", "int"), ("LAYOUT_LEN", 3), ("T", ctype(x.dtype)), ("WG", b.group))
    if length >= LONG_ROW and rows < 4 * b.compute_units and b.group >= 32:
        kernel = b.kernels.get("softmax.cl", "log_softmax_group", defines)
        b.enqueue(kernel, (rows * b.group,), (b.group,), (out.data, x.data, layout))
    else:
        b._launch(b.kernels.get("softmax.cl", "log_softmax_rows", defines), rows,
                  (out.data, x.data, layout))
    return out
