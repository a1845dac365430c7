"""The OpenCL buffer type: an n-d view (shape, element strides, element offset) of pooled memory.

The core reads only `.shape` and `.dtype`; kernels read the rest. Slicing, permuting,
broadcasting and most reshapes are O(1): they make a new `CLArray` over the same memory, so a
write through a view (`assign`, `put`) shows in its base, as with NumPy. Strides are counted in
elements and may be negative (reversed slices) or zero (broadcast dims).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ndlite.device import ShapeError
from ndlite.dtypes import HALF

#: the dtypes a CLArray holds, each keyed by itself (a lookup normalizes any equal dtype)
DTYPES = {np.dtype(t): np.dtype(t)
          for t in ("float32", "float64", "int32", "int64", "bool", *HALF)}
#: the largest element index a kernel may address with 32-bit index arithmetic
INT32_LIMIT = 2**31 - 1


class CLArray:
    """A strided view of an OpenCL buffer (`data` is None when the array has no elements)."""

    __slots__ = ("data", "shape", "dtype", "strides", "offset", "size", "wide")

    def __init__(self, data, shape: tuple, dtype: np.dtype, strides: tuple | None = None,
                 offset: int = 0, wide: bool | None = None):
        self.data = data
        self.shape = shape
        self.dtype = dtype
        self.strides = c_strides(shape) if strides is None else strides
        self.offset = offset
        self.size = numel(shape)
        # kernels index a wide array's allocation with 64-bit arithmetic (views inherit it:
        # asking the buffer its size is a driver call)
        if wide is None:
            wide = data is not None and data.size > INT32_LIMIT * dtype.itemsize
        self.wide = wide

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def contiguous(self) -> bool:
        """Row-major with no gaps (the offset may be anything)."""
        return is_contiguous(self.shape, self.strides)

    def view(self, shape: tuple, strides: tuple, offset: int) -> CLArray:
        return CLArray(self.data, shape, self.dtype, strides, offset, self.wide)

    def __repr__(self) -> str:
        return (f"CLArray(shape={self.shape}, dtype={self.dtype}, strides={self.strides}, "
                f"offset={self.offset})")


@lru_cache(maxsize=4096)
def numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@lru_cache(maxsize=4096)
def c_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


@lru_cache(maxsize=4096)
def is_contiguous(shape: tuple, strides: tuple) -> bool:
    step = 1
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n == 0:
            return True
        if n != 1 and s != step:
            return False
        step *= n
    return True


# ---- views ------------------------------------------------------------------------------------


def slice_view(x: CLArray, key: tuple) -> CLArray:
    """Basic indexing with a normalized key (ints, slices, None), as `Backend.slice` describes."""
    shape, strides, offset, dim = [], [], x.offset, 0
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        n, s = x.shape[dim], x.strides[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if count:
                offset += start * s
            shape.append(count)
            strides.append(s * step)
        else:
            offset += int(k) * s
        dim += 1
    shape.extend(x.shape[dim:])
    strides.extend(x.strides[dim:])
    return x.view(tuple(shape), tuple(strides), offset)


def permute_view(x: CLArray, axes: tuple) -> CLArray:
    return x.view(tuple(x.shape[a] for a in axes), tuple(x.strides[a] for a in axes), x.offset)


def broadcast_view(x: CLArray, shape: tuple) -> CLArray:
    """`x` seen with `shape` (NumPy broadcasting: new leading dims and size-1 dims get stride 0)."""
    if x.shape == shape:
        return x
    lead = len(shape) - len(x.shape)
    strides = [0] * lead
    for n, m, s in zip(x.shape, shape[lead:], x.strides, strict=True):
        strides.append(s if n == m else 0)
    return x.view(shape, tuple(strides), x.offset)


def broadcast_shape(op: str, a: tuple, b: tuple) -> tuple:
    """The shape NumPy broadcasts shapes `a` and `b` to; ShapeError (naming `op`) if none."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"{op}: shapes {a} and {b} cannot be broadcast together")
        out.append(y if x == 1 else x)
    return tuple(out)


@lru_cache(maxsize=4096)
def reshape_strides(shape: tuple, strides: tuple, new_shape: tuple) -> tuple | None:
    """Strides that show a (shape, strides) layout as `new_shape` without copying, or None.

    NumPy's `_attempt_nocopy_reshape`: runs of old dims that are contiguous with each other can
    be split or merged freely; size-1 dims take any stride."""
    if numel(shape) == 0:
        return c_strides(new_shape)
    old = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    old_dims = [n for n, _ in old]
    old_strides = [s for _, s in old]
    new = list(new_shape)
    out = [0] * len(new)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new) and oi < len(old_dims):
        np_, op = new[ni], old_dims[oi]
        while np_ != op:
            if np_ < op:
                np_ *= new[nj]
                nj += 1
            else:
                op *= old_dims[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if old_strides[ok] != old_dims[ok + 1] * old_strides[ok + 1]:
                return None
        out[nj - 1] = old_strides[oj - 1]
        for nk in range(nj - 1, ni, -1):
            out[nk - 1] = out[nk] * new[nk]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = out[ni - 1] if ni >= 1 else 1
    for nk in range(ni, len(new)):
        out[nk] = last
    return tuple(out)


# ---- layouts for kernels ----------------------------------------------------------------------


@lru_cache(maxsize=8192)
def collapse(shape: tuple, *strides: tuple) -> tuple:
    """Merge dims that every operand walks contiguously and drop size-1 dims.

    Returns (shape, strides_0, strides_1, ...) with as few dims as the layouts allow, so
    kernels are specialized on a small ndim: same-shape contiguous operands collapse to 1 dim."""
    dims = [d for d, n in enumerate(shape) if n != 1]
    out_shape = [shape[d] for d in dims]
    out_strides = [[s[d] for d in dims] for s in strides]
    i = len(out_shape) - 1
    while i > 0:
        n = out_shape[i]
        if all(s[i - 1] == s[i] * n for s in out_strides):
            out_shape[i - 1] *= n
            del out_shape[i]
            for s in out_strides:
                s[i - 1] = s[i]
                del s[i]
        i -= 1
    return (tuple(out_shape), *(tuple(s) for s in out_strides))
