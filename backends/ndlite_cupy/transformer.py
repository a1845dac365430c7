"""The transformer fast paths of the CuPy backend (protocol.py; the specification is
ndlite/device/transformer_fallbacks.py), on the kernels in kernels/transformer.cu.

- embedding_grad: a sort-and-segment sum. The positions are sorted by (row, position) once
  (unique int64 keys, so the order is that of a stable sort), each row's run is cut into
  chunks of at most CHUNK positions; one kernel sums every chunk (thread per (chunk, column)),
  a second every row's chunks in order (thread per (row, column)). No atomics, no thread
  walking a long run: thousands of positions sharing a token run as hundreds of chunks.
- layer_norm: one kernel forward (a warp per row: mean, variance, y; mean and rstd kept);
  backward one kernel for grad_x and two for the weight and bias column sums (per block of
  rows, then the blocks in order).
- causal_softmax: one kernel each way, a warp per row of scores.
- dropout_mask: one grid-stride kernel, a counter-based draw per element; dropout: the same
  draw times x, in one pass (the mask never in memory).
The row kernels run blocks of ROWS warps, one row each, reducing with warp shuffles.
Empty tensors and non-float dtypes take the fallbacks. Every function takes the backend `b`
first.
"""

from __future__ import annotations

from functools import cache

import cupy
import numpy as np

from ndlite.device import transformer_fallbacks as tfb

from . import graph, kernels
from .kernels import launch
from .nn import FLOATS, _covered, _index

#: the most positions one thread of ndl_segment_chunks adds up
CHUNK = 32
#: a warp per row, ROWS warps per block; at most ROW_BLOCKS blocks, striding over the rest
ROWS, ROW_BLOCKS = 4, 65536
#: the fewest rows of one partial column sum of layer_norm's weight and bias gradients, and
#: the most partial sums per column
COLUMN_ROWS, COLUMN_BLOCKS = 64, 1024
KERNELS = ("ndl_segment_chunks", "ndl_segment_rows", "ndl_layer_norm", "ndl_layer_norm_grad",
           "ndl_layer_norm_columns", "ndl_column_total", "ndl_causal_softmax",
           "ndl_causal_softmax_grad", "ndl_dropout_mask", "ndl_dropout")


@cache
def _raw():
    return kernels.RawKernels("transformer", KERNELS, KERNELS)


def _kernel(name: str, dtype, index: str):
    return _raw().get(name, FLOATS[dtype], index)


def _rows(function, rows: int, args: tuple) -> None:
    """Launch a row kernel: a warp per row, ROWS rows per block."""
    function((min(-(-rows // ROWS), ROW_BLOCKS),), (32, ROWS), args)


def _scalar(dtype, value: float):
    return dtype.type(value)


# ---- embedding_grad ---------------------------------------------------------------------------


def segments(index, n: int, num_rows: int):
    """(order, bounds, row_bounds) for n positions' rows `index`: `order` the positions sorted
    by (row, position); chunk c covers order[bounds[c]:bounds[c + 1]] (one row's, at most
    CHUNK long); row r's chunks are row_bounds[r]:row_bounds[r + 1]. All int64, of sizes fixed
    by n and num_rows (chunks past the last are empty): no host sync, recordable in a graph."""
    positions = cupy.arange(n, dtype=np.int64)
    keys = cupy.sort(cupy.ascontiguousarray(index, dtype=np.int64).ravel() * n + positions)
    rows = keys // n
    order = keys - rows * n
    first = cupy.searchsorted(rows, rows, side="left")  # where each position's run starts
    chunk = cupy.cumsum((positions - first) % CHUNK == 0, dtype=np.int64) - 1  # nondecreasing
    most = n // CHUNK + min(n, num_rows) + 1  # each row's run adds at most one partial chunk
    bounds = cupy.searchsorted(chunk, cupy.arange(most + 1, dtype=np.int64), side="left")
    # row r's first chunk: that of its first position (or one past the last chunk)
    at = cupy.searchsorted(rows, cupy.arange(num_rows + 1, dtype=np.int64), side="left")
    row_bounds = cupy.concatenate((chunk, chunk[-1:] + 1))[at]
    return order, bounds.astype(np.int64), row_bounds.astype(np.int64)


def embedding_grad(b, grad, index, num_rows):
    n, d = grad.shape
    if not _covered(grad) or num_rows == 0:
        return tfb.embedding_grad(b, grad, index, num_rows)
    grad = cupy.ascontiguousarray(grad)
    order, bounds, row_bounds = segments(index, n, num_rows)
    chunks = bounds.size - 1
    partial = cupy.empty((chunks, d), dtype=grad.dtype)
    out = cupy.empty((num_rows, d), dtype=grad.dtype)
    name, cast = _index(partial.size, grad.size, out.size)
    launch(_kernel("ndl_segment_chunks", grad.dtype, name), partial.size,
           (grad, order, bounds, partial, cast(chunks), cast(d)))
    launch(_kernel("ndl_segment_rows", grad.dtype, name), out.size,
           (partial, row_bounds, out, cast(num_rows), cast(d)))
    return out


# ---- layer_norm -------------------------------------------------------------------------------


def _dense(t):
    return None if t is None else cupy.ascontiguousarray(t)


def layer_norm(b, x, weight, bias, eps):
    rows, d = x.shape
    if not _covered(x):
        return tfb.layer_norm(b, x, weight, bias, eps)
    x = cupy.ascontiguousarray(x)
    y = cupy.empty(x.shape, dtype=x.dtype)
    mean = cupy.empty((rows,), dtype=x.dtype)
    rstd = cupy.empty((rows,), dtype=x.dtype)
    name, cast = _index(x.size)
    _rows(_kernel("ndl_layer_norm", x.dtype, name), rows,
          (x, _dense(weight), _dense(bias), y, mean, rstd, cast(rows), cast(d),
           _scalar(x.dtype, eps)))
    return y, mean, rstd


def layer_norm_grad(b, grad, x, weight, mean, rstd, bias):
    rows, d = x.shape
    if not _covered(x, grad):
        return tfb.layer_norm_grad(b, grad, x, weight, mean, rstd, bias)
    grad, x = cupy.ascontiguousarray(grad), cupy.ascontiguousarray(x)
    mean, rstd, weight = _dense(mean), _dense(rstd), _dense(weight)
    grad_x = cupy.empty(x.shape, dtype=x.dtype)
    name, cast = _index(x.size)
    _rows(_kernel("ndl_layer_norm_grad", x.dtype, name), rows,
          (grad, x, weight, mean, rstd, grad_x, cast(rows), cast(d)))
    if weight is None and not bias:
        return grad_x, None, None
    per = max(COLUMN_ROWS, -(-rows // COLUMN_BLOCKS))
    blocks = -(-rows // per)
    partial_w = cupy.empty((blocks, d), dtype=x.dtype) if weight is not None else None
    partial_b = cupy.empty((blocks, d), dtype=x.dtype) if bias else None
    launch(_kernel("ndl_layer_norm_columns", x.dtype, name), blocks * d,
           (grad, x, mean, rstd, partial_w, partial_b, cast(rows), cast(d), cast(per),
            cast(blocks)))
    totals = []
    for partial in (partial_w, partial_b):
        if partial is None:
            totals.append(None)
            continue
        total = cupy.empty((d,), dtype=x.dtype)
        launch(_kernel("ndl_column_total", x.dtype, name), d,
               (partial, total, cast(blocks), cast(d)))
        totals.append(total)
    return grad_x, totals[0], totals[1]


# ---- causal softmax ---------------------------------------------------------------------------


def causal_softmax(b, x, scale):
    if not _covered(x):
        return tfb.causal_softmax(b, x, scale)
    x = cupy.ascontiguousarray(x)
    length, source = x.shape[-2], x.shape[-1]
    rows = x.size // source
    out = cupy.empty(x.shape, dtype=x.dtype)
    name, cast = _index(x.size)
    _rows(_kernel("ndl_causal_softmax", x.dtype, name), rows,
          (x, out, cast(rows), cast(length), cast(source), _scalar(x.dtype, scale)))
    return out


def causal_softmax_grad(b, grad, out, scale):
    if not _covered(grad, out):
        return tfb.causal_softmax_grad(b, grad, out, scale)
    grad, out = cupy.ascontiguousarray(grad), cupy.ascontiguousarray(out)
    length, source = out.shape[-2], out.shape[-1]
    rows = out.size // source
    grad_x = cupy.empty(out.shape, dtype=out.dtype)
    name, cast = _index(out.size)
    _rows(_kernel("ndl_causal_softmax_grad", out.dtype, name), rows,
          (grad, out, grad_x, cast(rows), cast(length), cast(source),
           _scalar(out.dtype, scale)))
    return grad_x


# ---- dropout_mask -----------------------------------------------------------------------------


def dropout_mask(b, shape, p, seed, dtype):
    dtype = np.dtype(dtype)
    out = cupy.empty(tuple(shape), dtype=dtype)
    if out.size == 0 or dtype not in FLOATS:
        return tfb.dropout_mask(b, shape, p, seed, dtype)
    name, cast = _index(out.size)
    launch(_kernel("ndl_dropout_mask", dtype, name), out.size,
           (out, np.uint64(seed), np.uint64(tfb.dropout_threshold(p)), dtype.type(1.0 / (1.0 - p)),
            cast(out.size)))
    return out


def dropout(b, x, p, seed):
    """x * dropout_mask(x.shape, p, seed, x.dtype) in one pass (ndl_dropout)."""
    if b._recording is not None:  # a replay would reuse the recorded seed's mask
        raise graph.refused("dropout")
    if x.size == 0 or x.dtype not in FLOATS:
        return tfb.dropout(b, x, p, seed)
    shape = x.shape  # (ascontiguousarray makes a 0-d array 1-d)
    x = cupy.ascontiguousarray(x)
    out = cupy.empty_like(x)
    name, cast = _index(out.size)
    launch(_kernel("ndl_dropout", x.dtype, name), out.size,
           (x, out, np.uint64(seed), np.uint64(tfb.dropout_threshold(p)),
            x.dtype.type(1.0 / (1.0 - p)), cast(out.size)))
    return out.reshape(shape)
