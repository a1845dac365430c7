"""gather, scatter_add and put on CuPy, deterministic and without atomics.

CuPy's own scatter routines (`cupyx.scatter_add`, `add.at`) use atomicAdd: floating-point sums
then depend on the order threads happen to run in, and change from run to run. Here every
output element is owned by one thread that reads its contributions in a fixed order
(kernels/indexing.cu), so results are bitwise identical run to run -- and equal to NumPy's
`add.at`, which adds in the same order.
"""

from __future__ import annotations

import math

import cupy
import numpy as np

from .kernels import kernels

#: scatter_add scans the indexed axis once per output element up to this length; longer axes
#: sort the contributions by (output element, position) first, so each thread reads only its own
DIRECT_MAX_LENGTH = 64


def _around(shape: tuple, axis: int) -> tuple[int, int]:
    """(P, Q): the products of the dims before and after `axis`."""
    return math.prod(shape[:axis]), math.prod(shape[axis + 1:])


def gather(x, index, axis: int):
    """out[..., j, ...] = x[..., index[..., j, ...], ...]; index dims other than `axis` equal
    x's or are 1 (broadcast)."""
    out_shape = tuple(index.shape[d] if d == axis else n for d, n in enumerate(x.shape))
    out = cupy.empty(out_shape, dtype=x.dtype)
    if out.size == 0:
        return out
    _, q = _around(out_shape, axis)
    kernels().gather(index, x, out_shape[axis], x.shape[axis], q, out)
    return out


def scatter_add(index, values, axis: int, size: int):
    """Zeros of values' shape with `size` along `axis`, plus out[..., index[.., j, ..], ...] +=
    values[..., j, ...], summed per output element in ascending j."""
    shape = list(values.shape)
    shape[axis] = size
    out = cupy.empty(shape, dtype=values.dtype)
    length = values.shape[axis]
    if out.size == 0:
        return out
    if values.size == 0:  # nothing along the axis: every sum is empty
        out.fill(0)
        return out
    _, q = _around(values.shape, axis)
    values = cupy.ascontiguousarray(values)
    k = kernels()
    if length <= DIRECT_MAX_LENGTH:
        if index.shape != values.shape:
            index = cupy.broadcast_to(index, values.shape)
        k.scatter_add_direct(values, index, length, size, q, out)
        return out
    # keys (output element, j) are unique and below out.size * length, far inside int64
    keys = k.scatter_key(index, length, size, q, cupy.empty(values.shape, dtype=np.int64))
    keys = cupy.sort(keys.ravel())
    bounds = cupy.arange(out.size + 1, dtype=np.int64) * length
    starts = cupy.searchsorted(keys, bounds)
    k.scatter_add_sorted(keys, starts, values, length, size, q, out)
    return out


def put(dst, flat_index, values) -> None:
    """dst.flat[flat_index[k]] = values[k] in dst's row-major order (dst may be any view);
    with repeated positions the last write wins."""
    n = flat_index.size
    if n == 0:
        return
    flat_index = flat_index.reshape(-1)
    values = values.reshape(-1)
    if values.dtype != dst.dtype:
        values = values.astype(dst.dtype)
    elif cupy.may_share_memory(dst, values):  # read every value before any write
        values = values.copy()
    k = kernels()
    keys = cupy.sort(k.put_key(flat_index, n))
    k.put_last(keys, values, n, dst, size=n)
