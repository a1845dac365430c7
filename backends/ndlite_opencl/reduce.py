"""sum / max / min / argmax over any axes, with kernels/reduce.cl.

The input is read in place through its strides: the kept dims and the reduced dims are each
collapsed, giving M outputs of K elements. Many outputs (or short rows) take one work-item per
output; few long rows take a work-group per row, split into P chunks when there are too few
rows to fill the device, the P partials then reduced by a second launch. On GPUs, many rows that
are contiguous in memory take a warp-sized group each, so each row is read coalesced. The plan
depends only on the shapes and the device, so results are bitwise the same run to run.
Halves are read as floats and reduced in float32, the result rounded once to the half.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import ShapeError

from .array import INT32_LIMIT, CLArray, c_strides, collapse
from .kernels import STORAGE, ctype, slot

_CODES = {"sum": 0, "max": 1, "min": 2, "argmax": 3}
_INT64, _FLOAT32 = np.dtype("int64"), np.dtype("float32")
_LOWEST = {"float": "-INFINITY", "double": "-INFINITY", "int": "INT_MIN", "long": "LONG_MIN",
           "uchar": "0"}
_HIGHEST = {"float": "INFINITY", "double": "INFINITY", "int": "INT_MAX", "long": "LONG_MAX",
            "uchar": "1"}
#: each work-item of the group kernel should get at least this many elements
_PER_ITEM = 8


def reduce(b, x: CLArray, axes: tuple, keepdims: bool, op: str) -> CLArray:
    """`op` of `x` over `axes` (argmax: over the one axis, returning int64 first indices).

    The launches (kernels, grids, layouts) are kept per (op, layout of x, axes): a repeated
    call costs a dict lookup, its allocations and the enqueues."""
    plans = b.__dict__.setdefault("_reduce_plans", {})
    key = (op, x.shape, x.strides, x.offset, x.dtype, x.wide, axes, keepdims)
    plan = plans.get(key)
    if plan is None:
        plan = _plan(b, x, axes, keepdims, op)
        if plan is None:
            return _degenerate(b, x, axes, keepdims, op)
        if len(plans) > 4096:
            plans.clear()
        plans[key] = plan
    out_shape, acc_dtype, passes = plan
    source, source_index = x, None
    for kernel, grid, local, layout, n_out in passes:
        values = b._new((n_out,), acc_dtype, op)
        indices = b._new((n_out,), _INT64, op) if op == "argmax" else None
        b.enqueue(kernel, grid, local,
                  (values.data, None if indices is None else indices.data, source.data,
                   None if source_index is None else source_index.data, layout))
        source, source_index = values, indices
    out = source_index if op == "argmax" else source
    out = out.view(out_shape, c_strides(out_shape), 0)
    return b.astype(out, x.dtype) if x.dtype in STORAGE and op != "argmax" else out


def _shapes(x: CLArray, axes: tuple, keepdims: bool, op: str):
    axes = tuple(sorted(set(axes)))
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdims \
        else tuple(x.shape[d] for d in kept)
    if x.dtype in STORAGE:
        acc_dtype = _FLOAT32
    else:
        acc_dtype = _INT64 if op == "sum" and x.dtype.kind != "f" else x.dtype
    return axes, kept, out_shape, acc_dtype


def _degenerate(b, x, axes, keepdims, op):
    """Nothing reduced, no outputs, or empty rows."""
    axes, kept, out_shape, acc_dtype = _shapes(x, axes, keepdims, op)
    out_dtype = _INT64 if op == "argmax" else x.dtype if x.dtype in STORAGE else acc_dtype
    if not axes:
        if op == "argmax":
            return b.full(out_shape, 0, _INT64)
        return b.reshape(b.astype(x, out_dtype), out_shape)
    if prod(x.shape[d] for d in kept) == 0:
        return b.empty(out_shape, out_dtype)
    if op != "sum":
        raise ShapeError(f"{op}: zero-size reduction over axes {axes} of shape {x.shape}")
    return b.full(out_shape, 0, out_dtype)


def _plan(b, x, axes, keepdims, op):
    """(output shape, accumulator dtype, the passes' launches), or None when there is
    nothing to launch."""
    axes, kept, out_shape, acc_dtype = _shapes(x, axes, keepdims, op)
    M = prod(x.shape[d] for d in kept)
    K = prod(x.shape[d] for d in axes)
    if not axes or M == 0 or K == 0:
        return None
    kept_shape, kept_strides = collapse(tuple(x.shape[d] for d in kept),
                                        tuple(x.strides[d] for d in kept))
    red_shape, red_strides = collapse(tuple(x.shape[d] for d in axes),
                                      tuple(x.strides[d] for d in axes))
    if not red_shape:  # every reduced dim has size 1
        red_shape, red_strides = (1,), (0,)
    passes = []
    _pass(b, passes, x, False, x.offset, M, K, kept_shape, kept_strides, red_shape,
          red_strides, op, acc_dtype)
    return out_shape, acc_dtype, tuple(passes)


def _pass(b, passes, x, indexed, offset, M, K, kept_shape, kept_strides, red_shape,
          red_strides, op, acc_dtype):
    """Append one launch (two with partials) to `passes`."""
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
    wide = n_out > INT32_LIMIT or K > INT32_LIMIT or (x is not None and x.wide)
    idx, idx_np = ("long", np.int64) if wide else ("int", np.int32)
    defines = (("IDX", idx), ("LAYOUT_LEN", 5 + 2 * len(kept_shape) + 2 * len(red_shape)),
               *slot("T", acc_dtype if x is None else x.dtype), ("TA", ctype(acc_dtype)),
               ("FLOAT_ACC", int(acc_dtype.kind == "f")), ("REDUCE", _CODES[op]),
               ("NOUT", len(kept_shape)), ("NRED", len(red_shape)),
               ("WG", 1 if serial else group), ("INDEXED", int(indexed)),
               ("IDENTITY", _identity(op, acc_dtype)),
               ("CONTIG", int(contiguous_rows and not serial)))
    layout = b.layout((M, K, offset, chunk, P, *kept_shape, *kept_strides, *red_shape,
                       *red_strides), idx_np)
    if serial:
        kernel = b.kernels.get("reduce.cl", "reduce_serial", defines)
        passes.append((kernel, (-(-M // b.group) * b.group,), (b.group,), layout, n_out))
    else:
        kernel = b.kernels.get("reduce.cl", "reduce_group", defines)
        passes.append((kernel, (n_out * group,), (group,), layout, n_out))
    if P > 1:
        # second pass: each output reduces its P partials (contiguous rows of length P)
        kept = ((M,), (P,)) if M > 1 else ((), ())
        _pass(b, passes, None, op == "argmax", 0, M, P, *kept, (P,), (1,), op, acc_dtype)


def _identity(op: str, dtype: np.dtype) -> str:
    if op == "sum":
        return "0"
    name = ctype(dtype)
    return _HIGHEST[name] if op == "min" else _LOWEST[name]
