"""gather (take_along_axis), its adjoint scatter_add, and put, with kernels/index.cl.

scatter_add never scatters: each output element gathers the values whose index names it, in
index order, so no two work-items write one place (no atomics) and the sums equal NumPy's
`add.at` bit for bit. put keeps the last of repeated indices on the host, then writes in
parallel with no conflicts.
"""

from __future__ import annotations

import numpy as np

from ndlite.device import ShapeError

from . import halves
from .array import CLArray
from .kernels import STORAGE, ctype

_INT64 = np.dtype("int64")


def _index_defines(b, name: str, idx: str, ndim: int, head: int, **types) -> tuple:
    return (("IDX", idx), ("LAYOUT_LEN", head + 3 * ndim), ("NDIM", ndim), (name, 1),
            *((k, v) for k, v in types.items()))


def gather(b, x: CLArray, index: CLArray, axis: int) -> CLArray:
    """out[..., j, ...] = x[..., index[..., j, ...], ...] along `axis`."""
    if index.ndim != x.ndim:
        raise ShapeError(f"gather: index of shape {index.shape} needs x's ndim ({x.shape})")
    shape = []
    for d, (n, m) in enumerate(zip(x.shape, index.shape, strict=True)):
        if d != axis and n != m and n != 1 and m != 1:
            raise ShapeError(f"gather: shapes {x.shape} and index {index.shape} do not "
                             f"broadcast off axis {axis}")
        shape.append(m if d == axis or n == 1 else n)
    shape = tuple(shape)
    if x.dtype in STORAGE:  # a half's values are only moved: as their bits
        return halves.as_half(gather(b, halves.bits(x), index, axis), x.dtype)
    out = b._new(shape, x.dtype, "gather")
    if out.size == 0:
        return out
    x_strides = [0 if d == axis or (n == 1 and m != 1) else s
                 for d, (n, m, s) in enumerate(zip(x.shape, shape, x.strides, strict=True))]
    i_strides = [0 if n == 1 and m != 1 else s
                 for n, m, s in zip(index.shape, shape, index.strides, strict=True)]
    idx, idx_np = b._index_type(out.size, out, x, index)
    ndim = len(shape)
    defines = _index_defines(b, "GATHER", idx, ndim, 5, T=ctype(x.dtype))
    kernel = b.kernels.get("index.cl", "gather", defines)
    layout = b.layout((out.size, x.offset, index.offset, x.strides[axis], x.shape[axis],
                       *shape, *x_strides, *i_strides), idx_np)
    b._launch(kernel, out.size, (out.data, x.data, index.data, layout))
    return out


def scatter_add(b, index: CLArray, values: CLArray, axis: int, size: int) -> CLArray:
    """zeros of values' shape with `size` along `axis`, plus values at `index` along it."""
    if index.ndim != values.ndim or index.shape[axis] != values.shape[axis]:
        raise ShapeError(f"scatter_add: index {index.shape} does not match values "
                         f"{values.shape} along axis {axis}")
    shape = list(values.shape)
    shape[axis] = size
    shape = tuple(shape)
    out = b._new(shape, values.dtype, "scatter_add")
    if out.size == 0:
        return out
    count = values.shape[axis]
    if count == 0:
        b._fill(out, 0)
        return out
    v_strides = [0 if d == axis else s for d, s in enumerate(values.strides)]
    i_strides = [0 if d == axis or (n == 1 and m != 1) else s for d, (n, m, s) in
                 enumerate(zip(index.shape, values.shape, index.strides, strict=True))]
    idx, idx_np = b._index_type(out.size, out, values, index)
    ndim = len(shape)
    defines = _index_defines(b, "SCATTER_ADD", idx, ndim, 8, T=ctype(values.dtype))
    kernel = b.kernels.get("index.cl", "scatter_add", defines)
    layout = b.layout((out.size, values.offset, index.offset, count, size,
                       values.strides[axis], index.strides[axis], axis,
                       *shape, *v_strides, *i_strides), idx_np)
    b._launch(kernel, out.size, (out.data, values.data, index.data, layout))
    return out


def put(b, dst: CLArray, flat_index: CLArray, values: CLArray) -> None:
    """dst.flat[flat_index[k]] = values[k] in dst's row-major order; the last repeat wins."""
    if flat_index.ndim != 1 or values.shape != flat_index.shape:
        values = b.reshape(values, (values.size,))
        flat_index = b.reshape(flat_index, (flat_index.size,))
    if values.shape != flat_index.shape:
        raise ShapeError(f"put: {flat_index.size} indices but values of shape {values.shape}")
    n = flat_index.size
    if n == 0 or dst.size == 0:
        return
    if STORAGE.keys() & {dst.dtype, values.dtype}:
        if values.dtype != dst.dtype:
            values = b.astype(values, dst.dtype)  # rounded once
        if dst.dtype in STORAGE:  # a half's values are only moved: as their bits
            put(b, halves.bits(dst), flat_index, halves.bits(values))
            return
    # with repeated places, keep each one's last write: no two work-items then write one place
    host = b.to_numpy(flat_index) % dst.size
    select = None
    last = np.unique(host[::-1], return_index=True)[1]
    if last.size != n:
        keep = np.sort(n - 1 - last).astype(np.int64)
        select = b.from_numpy(keep)
        n = keep.size
    idx, idx_np = b._index_type(max(n, dst.size), dst, flat_index, values)
    ndim = max(dst.ndim, 1)
    shape, strides = (dst.shape, dst.strides) if dst.ndim else ((1,), (0,))
    defines = _index_defines(b, "PUT", idx, ndim, 7, T=ctype(values.dtype), TD=ctype(dst.dtype),
                             TD_BOOL=int(dst.dtype.kind == "b"))
    kernel = b.kernels.get("index.cl", "put", defines)
    layout = b.layout((n, dst.offset, flat_index.offset, values.offset, flat_index.strides[0],
                       values.strides[0], dst.size, *shape, *strides, *([0] * ndim)), idx_np)
    b._launch(kernel, n, (dst.data, flat_index.data, values.data,
                          None if select is None else select.data, layout))
