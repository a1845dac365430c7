"""The transformer fast paths of the OpenCL backend (protocol.py; the specification is
ndlite/device/transformer_fallbacks.py), on the kernels in kernels/transformer.cl.

- embedding_grad: on a GPU for few rows (rows x positions x column blocks up to SCAN_MAX: a
  character vocabulary, the positions of a context) one kernel, a work-group per (row, block
  of columns) walking every position in order, on the device alone; else a sort-and-segment
  sum: the (small) index vector is sorted on the host (a stable argsort; reading it back
  waits for the queue), each row's run cut into chunks of at most CHUNK positions; one kernel
  sums every chunk (a work-item per (chunk, column)), a second every row's chunks in order
  (per (row, column)). No atomics, and many positions sharing a row never serialize.
- layer_norm: one kernel forward (a work-group per row; mean and rstd kept), backward one for
  grad_x and two for the weight and bias column sums (per block of rows, then the blocks in
  order);
- causal_softmax: one kernel each way, a work-group per row of scores.
- dropout_mask: a counter-based draw per element; dropout: the same draw times x in one pass;
  gelu and gelu_grad: one pass each on elementwise.cl's map kernel (float32 and float64).
A work-group is a power of two near a quarter of the row on a GPU, one item on a CPU (which
runs a group's items in turn). Empty tensors and sizes past 32-bit indexing take the
fallbacks. Every function takes the backend `b` first.
"""

from __future__ import annotations

import numpy as np

from ndlite.device import transformer_fallbacks as tfb

from . import halves
from .array import INT32_LIMIT
from .elementwise import apply
from .kernels import actype, arith, slot

_FLOATS = (np.dtype("float32"), np.dtype("float64"))

#: the most positions one work-item of segment_chunks adds up
CHUNK = 32
#: on a GPU embedding_grad walks every position once per (row, block of columns) up to this
#: many of them in all (the GPT's 65 x 16384 x 3 and 256 x 16384 x 3), where reading the index
#: back to sort it waits for the whole queue. Not on CPUs: no queue to drain, and the walk
#: took 25-65x the sort there (bench/opencl_embedding.py on PoCL, 2 cores)
SCAN_MAX = 2**25
#: the fewest rows of one partial column sum of layer_norm's gradients, the most partials
COLUMN_ROWS, COLUMN_BLOCKS = 64, 1024


def _ok(*arrays) -> bool:
    return all(a.size > 0 and 4 * a.size < INT32_LIMIT for a in arrays)


def _dense(b, x):
    if x is None:
        return None
    return x if x.contiguous and x.offset == 0 else b.copy(x)


def _group(b, length: int) -> int:
    if not b.is_gpu:
        return 1
    t = 1
    while 2 * t <= b.group and (t < 32 or 4 * t < length):
        t *= 2
    return t


def _kernel(b, name: str, dtype, group: int = 1):
    defines = (("IDX", "int"), ("LAYOUT_LEN", 4), ("T", actype(dtype)), *slot("P", dtype),
               ("WG", group), ("GROUP_SUM", 1))  # common.cl's group_sum
    return b.kernels.get("transformer.cl", name, defines)


def _data(x):
    return None if x is None else x.data


# ---- embedding_grad ---------------------------------------------------------------------------


def segments(index: np.ndarray, num_rows: int):
    """(order, bounds, row_bounds) on the host: the positions sorted by row (stably); chunk c
    covers order[bounds[c]:bounds[c + 1]] (one row's, at most CHUNK long); row r's chunks are
    row_bounds[r]:row_bounds[r + 1]."""
    n = index.size
    order = np.argsort(index, kind="stable").astype(np.int64)
    rows = index[order]
    first = np.searchsorted(rows, rows, side="left")
    starts = np.flatnonzero((np.arange(n) - first) % CHUNK == 0)
    bounds = np.append(starts, n).astype(np.int64)
    row_bounds = np.searchsorted(rows[starts], np.arange(num_rows + 1)).astype(np.int64)
    return order, bounds, row_bounds


def embedding_grad(b, grad, index, num_rows):
    n, d = grad.shape
    if not _ok(grad) or num_rows == 0 or 4 * num_rows * d >= INT32_LIMIT:
        return halves.core(b, tfb.embedding_grad, grad, index, num_rows)
    group = _group(b, d)
    blocks = -(-d // group)
    if b.is_gpu and num_rows * n * blocks <= SCAN_MAX and index.dtype == np.int64:
        grad, index = _dense(b, grad), _dense(b, index)
        out = b._new((num_rows, d), grad.dtype, "embedding_grad")
        b.enqueue(_kernel(b, "embedding_rows", grad.dtype, group), (num_rows * blocks * group,),
                  (group,), (out.data, grad.data, index.data,
                             b.layout((n, d, blocks, 0), np.int32)))
        return out
    order, bounds, row_bounds = (b.from_numpy(a) for a in segments(
        b.to_numpy(index).reshape(-1), num_rows))
    grad = _dense(b, grad)
    chunks = bounds.size - 1
    partial = b._new((chunks, d), arith(grad.dtype), "embedding_grad")
    b._launch(_kernel(b, "segment_chunks", grad.dtype), chunks * d,
              (partial.data, grad.data, order.data, bounds.data,
               b.layout((chunks, d, 0, 0), np.int32)))
    out = b._new((num_rows, d), grad.dtype, "embedding_grad")
    b._launch(_kernel(b, "segment_rows", grad.dtype), num_rows * d,
              (out.data, partial.data, row_bounds.data, b.layout((num_rows, d, 0, 0), np.int32)))
    return out


# ---- layer_norm -------------------------------------------------------------------------------


def layer_norm(b, x, weight, bias, eps):
    rows, d = x.shape
    if not _ok(x):
        return halves.core(b, tfb.layer_norm, x, weight, bias, eps)
    x, weight, bias = _dense(b, x), _dense(b, weight), _dense(b, bias)
    y = b._new(x.shape, x.dtype, "layer_norm")
    mean, rstd = (b._new((rows,), arith(x.dtype), "layer_norm") for _ in range(2))
    group = _group(b, d)
    b.enqueue(_kernel(b, "layer_norm", x.dtype, group), (rows * group,), (group,),
              (y.data, mean.data, rstd.data, x.data, _data(weight), _data(bias),
               arith(x.dtype).type(eps), b.layout((rows, d, 0, 0), np.int32)))
    return y, mean, rstd


def layer_norm_grad(b, grad, x, weight, mean, rstd, bias):
    rows, d = x.shape
    if not _ok(x):
        return halves.core(b, tfb.layer_norm_grad, grad, x, weight, mean, rstd, bias)
    grad, x, weight = _dense(b, grad), _dense(b, x), _dense(b, weight)
    wide = arith(x.dtype)  # mean and rstd: float32 for halves (as layer_norm gives them)
    mean, rstd = (_dense(b, v if v.dtype == wide else b.astype(v, wide)) for v in (mean, rstd))
    grad_x = b._new(x.shape, x.dtype, "layer_norm_grad")
    group = _group(b, d)
    b.enqueue(_kernel(b, "layer_norm_grad", x.dtype, group), (rows * group,), (group,),
              (grad_x.data, grad.data, x.data, _data(weight), mean.data, rstd.data,
               b.layout((rows, d, 0, 0), np.int32)))
    if weight is None and not bias:
        return grad_x, None, None
    per = max(COLUMN_ROWS, -(-rows // COLUMN_BLOCKS))
    blocks = -(-rows // per)
    layout = b.layout((rows, d, per, blocks), np.int32)
    partial_w = b._new((blocks, d), wide, "layer_norm_grad") if weight is not None else None
    partial_b = b._new((blocks, d), wide, "layer_norm_grad") if bias else None
    b._launch(_kernel(b, "layer_norm_columns", x.dtype), blocks * d,
              (_data(partial_w), _data(partial_b), grad.data, x.data, mean.data, rstd.data,
               layout))
    totals = []
    for partial in (partial_w, partial_b):
        total = None
        if partial is not None:
            total = b._new((d,), x.dtype, "layer_norm_grad")
            b._launch(_kernel(b, "column_total", x.dtype), d, (total.data, partial.data, layout))
        totals.append(total)
    return grad_x, totals[0], totals[1]


# ---- causal softmax ---------------------------------------------------------------------------


def causal_softmax(b, x, scale):
    if not _ok(x):
        return halves.core(b, tfb.causal_softmax, x, scale)
    x = _dense(b, x)
    length, source = x.shape[-2], x.shape[-1]
    rows = x.size // source
    out = b._new(x.shape, x.dtype, "causal_softmax")
    group = _group(b, source)
    b.enqueue(_kernel(b, "causal_softmax", x.dtype, group), (rows * group,), (group,),
              (out.data, x.data, arith(x.dtype).type(scale),
               b.layout((rows, length, source, 0), np.int32)))
    return out


def causal_softmax_grad(b, grad, out, scale):
    if not _ok(out):
        return halves.core(b, tfb.causal_softmax_grad, grad, out, scale)
    grad, out = _dense(b, grad), _dense(b, out)
    length, source = out.shape[-2], out.shape[-1]
    rows = out.size // source
    grad_x = b._new(out.shape, out.dtype, "causal_softmax_grad")
    group = _group(b, source)
    b.enqueue(_kernel(b, "causal_softmax_grad", out.dtype, group), (rows * group,),
              (group,), (grad_x.data, grad.data, out.data, arith(out.dtype).type(scale),
                         b.layout((rows, length, source, 0), np.int32)))
    return grad_x


# ---- dropout_mask, dropout, gelu ---------------------------------------------------------------


def dropout_mask(b, shape, p, seed, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    dtype = np.dtype(dtype)
    if n == 0 or arith(dtype).kind != "f":
        return tfb.dropout_mask(b, shape, p, seed, dtype)  # (a half: only when empty)
    out = b._new(tuple(shape), dtype, "dropout")
    b._launch(_kernel(b, "dropout_mask", dtype), n,
              (out.data, np.uint64(seed), np.uint64(tfb.dropout_threshold(p)),
               arith(dtype).type(1.0 / (1.0 - p)), np.int64(n)))
    return out



def dropout(b, x, p, seed):
    """x * dropout_mask(x.shape, p, seed, x.dtype) in one pass, the mask never stored: a
    contiguous x of float32 or float64 (the same bits: x times the mask's value); others as
    the fallback does."""
    n = x.size
    if n == 0 or x.dtype not in _FLOATS or not x.contiguous:
        return tfb.dropout(b, x, p, seed)
    out = b._new(x.shape, x.dtype, "dropout")
    b._launch(_kernel(b, "dropout", x.dtype), n,
              (out.data, x.data, np.int64(x.offset), np.uint64(seed),
               np.uint64(tfb.dropout_threshold(p)), x.dtype.type(1.0 / (1.0 - p)), np.int64(n)))
    return out


def gelu(b, x, approximate):
    """GELU in one pass (elementwise.cl's map kernel) for float32 and float64; halves compose."""
    if x.dtype not in _FLOATS:
        return tfb.gelu(b, x, approximate)
    return apply(b, "GELU_TANH" if approximate == "tanh" else "GELU", [x], x.dtype)


def gelu_grad(b, grad, x, approximate):
    if x.dtype not in _FLOATS or grad.dtype != x.dtype:
        return tfb.gelu_grad(b, grad, x, approximate)
    return apply(b, "GELU_TANH_GRAD" if approximate == "tanh" else "GELU_GRAD", [grad, x],
                 x.dtype)
