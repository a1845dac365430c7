"""Sums over the leading axes of a C-contiguous float array (bias gradients, batch means), and
over every axis but 1 (a conv layer's bias gradient), on the kernels of kernels/columns.cu:
per block of rows (or chunk of a channel), then the blocks in order, in double.

CuPy's reduction over axis 0 of a (16384, 1536) array took 0.4 ms, a tenth of a GPT step's
GPU time in bias gradients; these two kernels read the array once, coalesced."""

from __future__ import annotations

import math

import cupy

from . import kernels
from .kernels import launch
from .nn import FLOATS, _index

#: fewest rows the blocked kernels take; rows per block; the most blocks per column. Every
#: row count: on fewer rows CuPy's reduction took about as little GPU time, but its float64
#: sum and cast cost ~80 us of host time against ~15 for these two launches (the seed CNN's
#: fully connected biases, 128 rows, on the H100 host), and the host paces small steps
MIN_ROWS, ROWS_PER, MAX_BLOCKS = 1, 64, 1024
#: most rows one launch adds with a thread per column (ndl_column_direct): the seed CNN's
#: linear biases (128 rows) in one launch, not two (~8 us of host time each on the H100 host)
DIRECT_ROWS = 256


def leading(x, axes) -> int:
    """How many leading axes `axes` names when it is exactly (0, 1, ..., k - 1) with k < ndim,
    x is C-contiguous and has MIN_ROWS rows or more; else 0 (use CuPy's reduction)."""
    k = len(axes)
    if (k == 0 or k >= x.ndim or tuple(sorted(axes)) != tuple(range(k))
            or x.dtype not in FLOATS or not x.flags.c_contiguous):
        return 0
    return k if math.prod(x.shape[:k]) >= MIN_ROWS else 0


def column_sum(x, k: int, keepdims: bool):
    """The sum over x's first k axes (leading(x, axes) == k), in x's dtype."""
    rows = math.prod(x.shape[:k])
    d = x.size // rows
    out = cupy.empty(x.shape[k:], dtype=x.dtype)
    name, cast = _index(x.size)
    table = kernels.raw("columns")
    if rows <= DIRECT_ROWS:
        launch(table.get("ndl_column_direct", FLOATS[x.dtype], name), d,
               (x, out, cast(rows), cast(d)))
        return out.reshape((1,) * k + out.shape) if keepdims else out
    rows_per = max(ROWS_PER, -(-rows // MAX_BLOCKS))
    blocks = -(-rows // rows_per)
    partial = cupy.empty((blocks, d), dtype=cupy.float64)
    launch(table.get("ndl_column_partial", FLOATS[x.dtype], name), partial.size,
           (x, partial, cast(rows), cast(d), cast(rows_per), cast(blocks)))
    launch(table.get("ndl_column_finish", FLOATS[x.dtype], name), d,
           (partial, out, cast(blocks), cast(d)))
    return out.reshape((1,) * k + out.shape) if keepdims else out


#: values of a channel one block of ndl_channel_partial sums at least; threads per block
CHANNEL_PER, CHANNEL_THREADS = 8192, 256


def all_but_channels(x, axes) -> bool:
    """Whether `axes` is every axis of x but 1 (x C-contiguous, float, 3-D or more): a conv
    layer's bias gradient, which CuPy reduces in two calls (float64 sum, cast) of ~30 us of
    host time each."""
    return (x.ndim >= 3 and x.dtype in FLOATS and x.flags.c_contiguous and x.size > 0
            and tuple(sorted(axes)) == (0,) + tuple(range(2, x.ndim)))


def channel_sum(x, keepdims: bool):
    """The sum over every axis but 1 (all_but_channels), in x's dtype, in double."""
    n, c = x.shape[0], x.shape[1]
    s = x.size // (n * c)
    per = max(CHANNEL_PER, -(-n * s // MAX_BLOCKS))
    chunks = -(-n * s // per)
    out = cupy.empty((c,), dtype=x.dtype)
    name, cast = _index(x.size)
    table = kernels.raw("columns")
    shape = (1, c) + (1,) * (x.ndim - 2) if keepdims else (c,)
    if chunks == 1:  # a block per channel writes its sum: one launch, the same bits
        table.get("ndl_channel_direct", FLOATS[x.dtype], name)(
            (min(c, 65536),), (CHANNEL_THREADS,), (x, out, cast(n), cast(c), cast(s), cast(per)))
        return out.reshape(shape)
    partial = cupy.empty((chunks, c), dtype=cupy.float64)
    table.get("ndl_channel_partial", FLOATS[x.dtype], name)(
        (min(chunks * c, 65536),), (CHANNEL_THREADS,),
        (x, partial, cast(n), cast(c), cast(s), cast(per), cast(chunks)))
    launch(table.get("ndl_column_finish", FLOATS[x.dtype], name), c,
           (partial, out, cast(chunks), cast(c)))
    return out.reshape(shape)


#: the longest rows ndl_row_sum adds with a thread each (longer: CuPy's reduction)
ROW_MAX = 4096


def row_sum(x, axes, keepdims: bool):
    """x's sum over its trailing `axes` (C-contiguous float, rows of at most ROW_MAX), a
    thread per row in double; None where it does not apply."""
    k = x.ndim - len(axes)
    if (k < 1 or tuple(sorted(axes)) != tuple(range(k, x.ndim)) or x.dtype not in FLOATS
            or not x.flags.c_contiguous or x.size == 0):
        return None
    rows = math.prod(x.shape[:k])
    d = x.size // rows
    if d > ROW_MAX or (d > 64 and rows < 1024):  # a few long rows: CuPy's parallel reduction
        return None
    out = cupy.empty(x.shape[:k], dtype=x.dtype)
    name, cast = _index(x.size)
    launch(kernels.raw("columns").get("ndl_row_sum", FLOATS[x.dtype], name), rows,
           (x, out, cast(rows), cast(d)))
    return out.reshape(x.shape[:k] + (1,) * len(axes)) if keepdims else out


def blocked_sum(x, axes, keepdims: bool):
    """x's sum over `axes` by these kernels when they take it (the leading axes, every axis
    but 1, or short trailing rows), else None (the backend's other paths)."""
    k = leading(x, axes)
    if k:
        return column_sum(x, k, keepdims)
    if all_but_channels(x, axes):
        return channel_sum(x, keepdims)
    return row_sum(x, axes, keepdims)
