"""A shared Backend for NumPy-compatible array modules ("xp", as Chainer calls it).

NumPy and CuPy expose the same array API, so one class implements every required and derived
primitive of the contract on top of `self.xp`. The hot elementwise primitives are bound in
`__init__` from the two tables below (_UNARY, _BINARY: our name -> the module's ufunc) as
instance attributes that point straight at the array module's ufuncs: a call
`backend.add(a, b)` then costs no Python frame of ours. Subclasses set `kind`/`name`, pass
their module, and override what their module does differently or slowly.
"""

from __future__ import annotations

import numpy as np

from . import hostmath
from .protocol import Backend

_UNARY = {
    "neg": "negative", "exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh",
    "abs": "absolute", "sign": "sign",
}
_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "pow": "power",
    "maximum": "maximum", "minimum": "minimum",
    "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
    "gt": "greater", "ge": "greater_equal",
}


class XpBackend(Backend):
    """Every primitive of the contract over a NumPy-compatible module `xp`."""

    def __init__(self, xp):
        self.xp = xp
        for arity, table in ((1, _UNARY), (2, _BINARY)):
            for ours, theirs in table.items():
                setattr(self, ours, self._array_result(getattr(xp, theirs), arity))

    def _array_result(self, ufunc, arity: int):
        """Make `ufunc` return an array even for 0-d inputs (NumPy returns scalars there)."""
        return ufunc

    # ---- transfer and memory ---------------------------------------------------------------

    def from_numpy(self, array):
        return self.xp.array(array, copy=True, order="C")

    def full(self, shape, value, dtype):
        return self.xp.full(shape, value, dtype=dtype)

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    def astype(self, x, dtype):
        return x.astype(dtype)

    def copy(self, x):
        return x.copy()

    def assign(self, dst, src):
        self.xp.copyto(dst, src, casting="unsafe")

    # ---- elementwise that are not single ufuncs --------------------------------------------

    def sigmoid(self, x):
        # exp(-|x|) never overflows; both branches are exact in relative terms.
        xp = self.xp
        e = xp.exp(-xp.abs(x))
        return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)

    def relu(self, x):
        return self.xp.maximum(x, x.dtype.type(0))

    def where(self, cond, a, b):
        out = self.xp.where(cond, a, b)
        # a Python scalar must not widen the buffer operand's dtype
        dtype = a.dtype if hasattr(a, "dtype") else getattr(b, "dtype", None)
        if dtype is not None and out.dtype != dtype:
            out = out.astype(dtype)
        return out

    # ---- math by name (hostmath.py's tables): the module's own functions -------------------

    def math(self, name, x):
        with np.errstate(all="ignore"):
            return hostmath.numpy_math(self.xp, name, x)

    def math2(self, name, a, b):
        return hostmath.numpy_math2(self.xp, name, a, b)

    def argsort(self, x, axis, descending):
        return hostmath.numpy_argsort(self.xp, x, axis, descending)

    def cumulative(self, name, x, axis):
        return getattr(self.xp, hostmath.SCANS[name])(x, axis=axis, dtype=x.dtype)

    # ---- reductions ------------------------------------------------------------------------

    def sum(self, x, axes, keepdims):
        return self.xp.asarray(self.xp.sum(x, axis=axes, keepdims=keepdims))

    def max(self, x, axes, keepdims):
        return self.xp.asarray(self.xp.max(x, axis=axes, keepdims=keepdims))

    def min(self, x, axes, keepdims):
        return self.xp.asarray(self.xp.min(x, axis=axes, keepdims=keepdims))

    def argmax(self, x, axis, keepdims):
        out = self.xp.argmax(x, axis=axis, keepdims=keepdims)
        return self.xp.asarray(out, dtype=np.int64)

    def argmin(self, x, axis, keepdims):
        out = self.xp.argmin(x, axis=axis, keepdims=keepdims)
        return self.xp.asarray(out, dtype=np.int64)

    # ---- linear algebra --------------------------------------------------------------------

    def matmul(self, a, b):
        return self.xp.matmul(a, b)

    # ---- movement --------------------------------------------------------------------------

    def reshape(self, x, shape):
        return x.reshape(shape)

    def shares_memory(self, a, b):
        return bool(self.xp.may_share_memory(a, b))

    def permute(self, x, axes):
        return x.transpose(axes)

    def broadcast_to(self, x, shape):
        return self.xp.broadcast_to(x, shape)

    def slice(self, x, key):
        # the trailing Ellipsis keeps an all-integer key a 0-d view instead of a scalar copy
        return x[(*key, Ellipsis)]

    def pad(self, x, widths, value):
        shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths))
        out = self.full(shape, value, x.dtype)  # the backend's own fill (CuPy: keeps -0.0)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths))] = x
        return out

    def concatenate(self, xs, axis):
        return self.xp.concatenate(xs, axis=axis)

    def gather(self, x, index, axis):
        return self.xp.take_along_axis(x, index, axis=axis)

    def _along_axis_index(self, index, axis, shape):
        """The fancy-index tuple that addresses `out[..., index[...], ...]` for every element."""
        xp = self.xp
        index = xp.broadcast_to(index, shape)
        idx = []
        for d, n in enumerate(shape):
            if d == axis:
                idx.append(index)
            else:
                idx.append(xp.arange(n).reshape([n if e == d else 1 for e in range(len(shape))]))
        return tuple(idx)

    def scatter_add(self, index, values, axis, size):
        shape = list(values.shape)
        shape[axis] = size
        out = self.xp.zeros(shape, dtype=values.dtype)
        self.xp.add.at(out, self._along_axis_index(index, axis, values.shape), values)
        return out

    def put(self, dst, flat_index, values):
        self.xp.put(dst, flat_index, values)
