"""sum / max / min / argmax over any axes, with kernels/reduce.cl.

The input is read in place through its strides: the kept dims and the reduced dims are each
collapsed, giving M outputs of K elements. Many outputs (or short rows) take one work-item per
output; few long rows take a work-group per row, split into P chunks when there are too few
rows to fill the device, the P partials then reduced by a second launch. On GPUs, many rows that
are contiguous in memory take a warp-sized group each, so each row is read coalesced. The plan
depends only on the shapes and the device, so results are bitwise the same run to run.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import ShapeError

from .array import CLArray, c_strides, collapse
from .kernels import ctype

_CODES = {"sum": 0, "max": 1, "min": 2, "argmax": 3}
_INT64 = np.dtype("int64")
_LOWEST = {"float": "-INFINITY", "double": "-INFINITY", "int": "INT_MIN", "long": "LONG_MIN",
           "uchar": "0"}
_HIGHEST = {"float": "INFINITY", "double": "INFINITY", "int": "INT_MAX", "long": "LONG_MAX",
            "uchar": "1"}
#: each work-item of the group kernel should get at least this many elements
_PER_ITEM = 8


def reduce(b, x: CLArray, axes: tuple, keepdims: bool, op: str) -> CLArray:
    """`op` of `x` over `axes` (argmax: over the one axis, returning int64 first indices)."""
    axes = tuple(sorted(set(axes)))
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdims \
        else tuple(x.shape[d] for d in kept)
    acc_dtype = _INT64 if op == "sum" and x.dtype.kind != "f" else x.dtype
    if not axes:  # nothing reduced
        if op == "argmax":
            return b.full(out_shape, 0, _INT64)
        return b.reshape(b.astype(x, acc_dtype), out_shape)
    M = prod(x.shape[d] for d in kept)
    K = prod(x.shape[d] for d in axes)
    out_dtype = _INT64 if op == "argmax" else acc_dtype
    if M == 0:
        return b.empty(out_shape, out_dtype)
    if K == 0:
        if op != "sum":
            raise ShapeError(f"{op}: zero-size reduction over axes {axes} of shape {x.shape}")
        return b.full(out_shape, 0, out_dtype)

    kept_shape, kept_strides = collapse(tuple(x.shape[d] for d in kept),
                                        tuple(x.strides[d] for d in kept))
    red_shape, red_strides = collapse(tuple(x.shape[d] for d in axes),
                                      tuple(x.strides[d] for d in axes))
    if not red_shape:  # every reduced dim has size 1
        red_shape, red_strides = (1,), (0,)
    values, indices = _pass(b, x, None, x.offset, M, K, kept_shape, kept_strides, red_shape,
                            red_strides, op, acc_dtype)
    out = indices if op == "argmax" else values
    return out.view(out_shape, c_strides(out_shape), 0)


def _pass(b, x, x_index, offset, M, K, kept_shape, kept_strides, red_shape, red_strides, op,
          acc_dtype):
    """One launch (two with partials): returns contiguous (values, int64 indices or None)."""
    contiguous_rows = len(red_shape) == 1 and red_strides[0] == 1
    group = b.group
    serial = K <= 64 or M >= b.compute_units * 256 or group < 32
    if serial and b.is_gpu and contiguous_rows and K > _PER_ITEM and group >= 32:
        # many contiguous rows: one item per row would read addresses K apart side by side;
        # a warp-sized group per row reads each row coalesced
        serial, group = False, 32
    if not serial and not b.is_gpu:
        # a CPU runs a work-group's items in turn: items of one group striding through a row
        # would each touch every cache line; one item per chunk streams through it instead
        group = 1
    P = 1
    if not serial:
        P = max(1, min(-(-K // (group * _PER_ITEM)), -(-4 * b.compute_units // M)))
    chunk = -(-K // P)
    n_out = M * P
    values = b._new((n_out,), acc_dtype, op)
    indices = b._new((n_out,), _INT64, op) if op == "argmax" else None
    idx, idx_np = b._index_type(max(n_out, K), x)
    defines = (("IDX", idx), ("LAYOUT_LEN", 5 + 2 * len(kept_shape) + 2 * len(red_shape)),
               ("T", ctype(x.dtype)), ("TA", ctype(acc_dtype)),
               ("FLOAT_ACC", int(acc_dtype.kind == "f")), ("REDUCE", _CODES[op]),
               ("NOUT", len(kept_shape)), ("NRED", len(red_shape)),
               ("WG", 1 if serial else group), ("INDEXED", int(x_index is not None)),
               ("IDENTITY", _identity(op, acc_dtype)),
               ("CONTIG", int(contiguous_rows and not serial)))
    layout = b.layout((M, K, offset, chunk, P, *kept_shape, *kept_strides, *red_shape,
                       *red_strides), idx_np)
    args = (values.data, None if indices is None else indices.data, x.data,
            None if x_index is None else x_index.data, layout)
    if serial:
        kernel = b.kernels.get("reduce.cl", "reduce_serial", defines)
        b._launch(kernel, M, args)
    else:
        kernel = b.kernels.get("reduce.cl", "reduce_group", defines)
        b.enqueue(kernel, (n_out * group,), (group,), args)
    if P == 1:
        return values, indices
    # second pass: each output reduces its P partials (contiguous rows of length P)
    kept = ((M,), (P,)) if M > 1 else ((), ())
    return _pass(b, values, indices, 0, M, P, *kept, (P,), (1,), op, acc_dtype)


def _identity(op: str, dtype: np.dtype) -> str:
    if op == "sum":
        return "0"
    name = ctype(dtype)
    return _HIGHEST[name] if op == "min" else _LOWEST[name]
