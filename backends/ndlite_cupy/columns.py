"""Sums over the leading axes of a C-contiguous float array (bias gradients, batch means) on
the kernels of kernels/columns.cu: per block of rows, then the blocks in order, in double.

CuPy's reduction over axis 0 of a (16384, 1536) array took 0.4 ms, a tenth of a GPT step's
GPU time in bias gradients; these two kernels read the array once, coalesced."""

from __future__ import annotations

import cupy
import numpy as np

from . import kernels
from .kernels import launch
from .nn import FLOATS, _index

#: fewest rows for which the blocked kernels beat CuPy's reduction; rows per block; the most
#: blocks per column
MIN_ROWS, ROWS_PER, MAX_BLOCKS = 256, 64, 1024


def leading(x, axes) -> int:
    """How many leading axes `axes` names when it is exactly (0, 1, ..., k - 1) with k < ndim,
    x is C-contiguous and has MIN_ROWS rows or more; else 0 (use CuPy's reduction)."""
    k = len(axes)
    if (k == 0 or k >= x.ndim or tuple(sorted(axes)) != tuple(range(k))
            or x.dtype not in FLOATS or not x.flags.c_contiguous):
        return 0
    return k if int(np.prod(x.shape[:k])) >= MIN_ROWS else 0


def column_sum(x, k: int, keepdims: bool):
    """The sum over x's first k axes (leading(x, axes) == k), in x's dtype."""
    rows = int(np.prod(x.shape[:k]))
    d = x.size // rows
    rows_per = max(ROWS_PER, -(-rows // MAX_BLOCKS))
    blocks = -(-rows // rows_per)
    partial = cupy.empty((blocks, d), dtype=np.float64)
    out = cupy.empty(x.shape[k:], dtype=x.dtype)
    name, cast = _index(x.size)
    table = kernels.raw("columns")
    launch(table.get("ndl_column_partial", FLOATS[x.dtype], name), partial.size,
           (x, partial, cast(rows), cast(d), cast(rows_per), cast(blocks)))
    launch(table.get("ndl_column_finish", FLOATS[x.dtype], name), d,
           (partial, out, cast(blocks), cast(d)))
    return out.reshape((1,) * k + out.shape) if keepdims else out
