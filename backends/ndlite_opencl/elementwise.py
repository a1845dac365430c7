"""Elementwise work on the OpenCL backend: every unary and binary primitive, comparison,
`where`, cast, copy and `assign` runs the one `map` kernel of kernels/elementwise.cl,
specialized per (op, dtypes, scalar operands, collapsed ndim, index width, elements per item).

`apply` keeps the launch plan (kernel, layout, grid) per operand layouts, so a repeated call
costs one dict lookup, an allocation and the enqueue; the kernel object of each specialization
is looked up once and kept. Both tables live on the backend (`b._plans`, `b._map_kernels`).
"""

from __future__ import annotations

import numpy as np

from ndlite.device import DTypeError

from . import mathops
from .array import DTYPES, INT32_LIMIT, CLArray, broadcast_shape, broadcast_view, collapse
from .kernels import STORAGE, actype, arith, slot

#: scalar exponents NumPy's power gets exactly right that OpenCL's pow need not
POW_SHORTCUTS = {2: "SQUARE", 1: "COPY", -1: "RECIPROCAL"}
#: elements per work-item of large contiguous elementwise ops on GPUs, and what is large
_PER_ITEM, _MANY = 4, 2**20
#: a number meets a half as float32 (the kernel computes in float; PyTorch's rule)
_SCALAR_TYPES = {d: np.float32 if d in STORAGE else d.type for d in DTYPES}
_FLOAT64 = np.dtype("float64")


def scalar(value, dtype: np.dtype):
    """A Python number as a kernel argument of `dtype` (NumPy's unsafe cast; bool as a byte)."""
    if dtype.kind == "b":
        return np.uint8(bool(value))
    try:
        return _SCALAR_TYPES[dtype](value)  # the direct constructor is 10x faster than astype
    except (OverflowError, ValueError):
        return np.asarray(value).astype(dtype)[()]


def apply(b, op: str, operands: list, out_dtype: np.dtype, out: CLArray | None = None,
          in_dtype: np.dtype | None = None) -> CLArray:
    """out = op(*operands) elementwise (op: an OP_* macro of elementwise.cl without its
    prefix); operands are CLArrays or (already cast) scalars. A new output unless `out`."""
    sig = [op, out_dtype, in_dtype]
    for x in operands:
        sig.append((x.shape, x.strides, x.offset, x.dtype, x.wide)
                   if isinstance(x, CLArray) else None)
    if out is not None:
        sig.append((out.shape, out.strides, out.offset, out.wide))
    sig = tuple(sig)
    plan = b._plans.get(sig)
    if plan is None:
        if len(b._plans) > 8192:  # shapes that never repeat must not grow it forever
            b._plans.clear()
        plan = b._plans[sig] = _plan(b, op, operands, out_dtype, out, in_dtype)
    kernel, layout, shape, n, grid = plan
    if out is None:
        out = b._new(shape, out_dtype, op.lower())
    if n:
        b.enqueue(kernel, grid, b._local,
                  (out.data, layout, *[x.data if isinstance(x, CLArray) else x for x in operands]))
    return out


def binary(b, name: str, op: str, x, y, out_dtype: np.dtype | None = None) -> CLArray:
    """A binary primitive: a buffer or a Python scalar on either side (a scalar takes the
    buffer's dtype); the result has that dtype, or `out_dtype` (bool for comparisons)."""
    x_buffer = isinstance(x, CLArray)
    y_buffer = isinstance(y, CLArray)
    if not (x_buffer or y_buffer):
        raise TypeError(f"{name}: needs at least one buffer operand")
    dtype = x.dtype if x_buffer else y.dtype
    if x_buffer and y_buffer and x.dtype != y.dtype:
        raise DTypeError(f"{name}: operands have different dtypes {x.dtype} and {y.dtype} "
                         f"(shapes {x.shape} and {y.shape}); the core promotes first")
    operands = [x if x_buffer else scalar(x, dtype), y if y_buffer else scalar(y, dtype)]
    return apply(b, op, operands, out_dtype or dtype, in_dtype=dtype)


def add_scalar_inplace(b, x: CLArray, value) -> None:
    """x += value in place, x keeping its dtype (step_fallbacks.py): one map kernel."""
    apply(b, "ADD", [x, scalar(value, x.dtype)], x.dtype, out=x, in_dtype=x.dtype)


def power(b, x, y) -> CLArray:
    if isinstance(x, CLArray) and not isinstance(y, CLArray) and arith(x.dtype).kind == "f":
        shortcut = POW_SHORTCUTS.get(y)
        if shortcut is not None:
            return apply(b, shortcut, [x], x.dtype)
    return binary(b, "pow", "POW", x, y)


def where(b, cond: CLArray, x, y) -> CLArray:
    if isinstance(x, CLArray):
        dtype = x.dtype
    elif isinstance(y, CLArray):
        dtype = y.dtype
    else:  # two numbers: a float makes float32 (the default float), else x's own kind
        dtype = np.dtype("float32") if isinstance(x, float) else DTYPES[np.asarray(x).dtype]
    operands = [cond] + [v if isinstance(v, CLArray) else scalar(v, dtype) for v in (x, y)]
    return apply(b, "WHERE", operands, dtype, in_dtype=dtype)


def _plan(b, op, operands, out_dtype, out, in_dtype) -> tuple:
    """(kernel, layout, output shape, element count, grid) of one call of `apply`."""
    buffers = [x for x in operands if isinstance(x, CLArray)]
    if out is None:
        shape = buffers[0].shape
        for x in buffers[1:]:
            if x.shape != shape:
                shape = broadcast_shape(op.lower(), shape, x.shape)
        out = CLArray(None, shape, out_dtype)  # the layout a new output will have
    shape, n = out.shape, out.size
    if n == 0:
        return None, None, shape, 0, None
    zeros = (0,) * len(shape)
    views = [broadcast_view(x, shape) if isinstance(x, CLArray) else x for x in operands]
    strides = [v.strides if isinstance(v, CLArray) else zeros for v in views]
    dims, *collapsed = collapse(shape, out.strides, *strides)
    ndim = len(dims)
    layouts = zip(collapsed, [out, *views], strict=True)
    if ndim <= 1 and all(s == (1,) or not ndim for s, v in layouts if isinstance(v, CLArray)):
        ndim = 0  # every buffer contiguous: the kernel skips index arithmetic
    wide = n > INT32_LIMIT or any(x.wide for x in buffers) or out.wide
    idx, idx_np = ("long", np.int64) if wide else ("int", np.int32)
    scalars = tuple(not isinstance(v, CLArray) for v in views)
    dtypes = tuple(v.dtype if isinstance(v, CLArray) else in_dtype or out_dtype
                   for v in views)
    # a GPU streams large contiguous operands faster with several elements per item
    per_item = _PER_ITEM if b.is_gpu and ndim == 0 and n >= _MANY else 1
    key = (op, dtypes, scalars, out_dtype, ndim, idx, per_item)
    kernel = b._map_kernels.get(key)
    if kernel is None:
        kernel = b._map_kernels[key] = _kernel(b, key, len(operands))
    layout = [n, out.offset]
    layout += [v.offset if isinstance(v, CLArray) else 0 for v in views]
    if ndim:
        layout += dims
        for s in collapsed:
            layout += s
    items = -(-n // per_item)
    grid = (-(-items // b.group) * b.group,)
    return kernel, b.layout(layout, idx_np), shape, n, grid


def _kernel(b, key: tuple, nin: int):
    op, dtypes, scalars, out_dtype, ndim, idx, per_item = key
    args = ", ".join(f"a{i}" for i in range(nin))
    # a double cast to a half is rounded once, from the double
    tout = "double" if op == "COPY" and dtypes[0] == _FLOAT64 else actype(out_dtype)
    defines = [("IDX", idx), ("LAYOUT_LEN", 2 + nin + ndim * (nin + 2)), ("NIN", nin),
               ("NDIM", ndim), ("PER_ITEM", per_item), ("TOUT", tout), *slot("POUT", out_dtype),
               ("OUT_BOOL", int(out_dtype.kind == "b")), ("EXPR", f"OP_{op}({args})"),
               ("F0", int(arith(dtypes[0]).kind == "f"))]
    for i, (dtype, is_scalar) in enumerate(zip(dtypes, scalars, strict=True)):
        defines += [(f"T{i}", actype(dtype)), (f"S{i}", int(is_scalar)), *slot(f"P{i}", dtype)]
    math = mathops.macro(op, arith(dtypes[0]))  # the math-by-name ops bring their own OP_ macro
    if math is not None:
        defines.append(math)
    return b.kernels.get("elementwise.cl", "map", tuple(defines))
