"""How many roundings stand behind each element of a result: the length factor of the SCALED
tolerance.

`8 eps S` holds for an elementwise op or a short sum, but a float32 dot product of length n
accumulated left to right may legitimately be off by about n/2 eps S (each partial sum is
rounded once), and a float64 backend summing 35 terms in another order than the float64
reference shows it. So the kit allows max(8, R) eps S, where R counts the roundings of the
computation in the worst case, as running error analysis does (Higham, ch. 3):

    add, sub -> max(Ra, Rb) + 1        mul, div, pow -> Ra + Rb + 1     exp, log, ... -> R + 1
    sum of n -> max(R) + n - 1         matmul over K -> max(Ra) + max(Rb) + K
    selections and movement -> the larger R of what they may pick      inputs, constants -> 0

The rounding-count backend evaluates exactly that: the reference with every float buffer
holding counts instead of values. Fast paths run their fallbacks (composed from these
primitives), so any new fast path is counted without changes here.

>>> import numpy as np
>>> r = rounding_backend()
>>> r.to_numpy(r.sum(r.from_numpy(np.ones((3, 5))), (1,), False)).tolist()
[4.0, 4.0, 4.0]
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..device.protocol import FAST_PATHS, Backend
from ..device.registry import get_backend
from ..dtypes import is_floating


def _is_float(x) -> bool:
    return getattr(getattr(x, "dtype", None), "kind", "") == "f"


def _count(x):
    """The count of an operand: a Python scalar or a constant is exact (0)."""
    return x if _is_float(x) else 0.0


def _binary(original, combine):
    def call(a, b):
        if _is_float(a) or _is_float(b):
            return np.asarray(combine(_count(a), _count(b)), dtype=np.float64)
        return original(a, b)

    return call


def _unary(original, extra: float):
    def call(x):
        return np.asarray(x + extra) if _is_float(x) else original(x)

    return call


def _fast_paths() -> list[str]:
    """The optional fast paths of the contract (protocol.FAST_PATHS)."""
    return list(FAST_PATHS)


class _Roundings:
    """The rounding-count backend's behaviour, mixed over the reference's class."""

    kind = name = "roundings"

    def __init__(self):
        super().__init__()
        # the reference binds its elementwise primitives per instance; rebind ours
        for name in ("add", "sub"):
            setattr(self, name, _binary(getattr(self, name),
                                        lambda a, b: np.maximum(a, b) + 1))
        for name in ("mul", "div", "pow"):
            setattr(self, name, _binary(getattr(self, name), lambda a, b: a + b + 1))
        for name in ("maximum", "minimum"):
            setattr(self, name, _binary(getattr(self, name), np.maximum))
        for name in ("exp", "log", "sqrt", "tanh", "sigmoid"):
            setattr(self, name, _unary(getattr(self, name), 1.0))
        for name in ("neg", "abs", "relu"):
            setattr(self, name, _unary(getattr(self, name), 0.0))
        self.sign = lambda x: np.zeros_like(x) if _is_float(x) else np.sign(x)
        for name in _fast_paths():  # their fallbacks, counted primitive by primitive
            setattr(self, name, getattr(Backend, name).__get__(self))

    def from_numpy(self, array):
        # inputs and the constants ops make (divisors, eps) are exact: count 0
        if is_floating(array.dtype):
            return np.zeros(array.shape, array.dtype)
        return super().from_numpy(array)

    def full(self, shape, value, dtype):
        exact = is_floating(np.dtype(dtype)) and np.isfinite(value)
        return super().full(shape, 0 if exact else value, dtype)

    def pad(self, x, widths, value):
        # a -inf padding is a sentinel that must never win a max: keep it
        return super().pad(x, widths, 0 if _is_float(x) and np.isfinite(value) else value)

    def assign(self, dst, src):
        super().assign(dst, 0 if _is_float(dst) and not hasattr(src, "dtype") else src)

    def where(self, cond, a, b):
        if not (_is_float(a) or _is_float(b)):
            return super().where(cond, a, b)
        shape = np.broadcast_shapes(np.shape(cond), np.shape(a), np.shape(b))
        dtype = a.dtype if hasattr(a, "dtype") else b.dtype
        return np.broadcast_to(np.maximum(_count(a), _count(b)), shape).astype(dtype)

    def sum(self, x, axes, keepdims):
        if not _is_float(x) or not axes:
            return super().sum(x, axes, keepdims)
        n = int(np.prod([x.shape[a] for a in axes]))
        if n == 0:
            return super().sum(x, axes, keepdims)
        return np.asarray(np.max(x, axis=axes, keepdims=keepdims) + (n - 1))

    def min(self, x, axes, keepdims):
        return super().max(x, axes, keepdims)

    def matmul(self, a, b):
        k = a.shape[-1]
        if k == 0:
            return super().matmul(a, b)
        left = np.max(a, axis=-1, keepdims=True)  # (..., n, 1)
        right = np.max(b, axis=-2, keepdims=True)  # (..., 1, m)
        return np.asarray(left + right + k)

    def scatter_add(self, index, values, axis, size):
        # the largest count among the terms of each slot, plus one per extra term
        shape = list(values.shape)
        shape[axis] = size
        where = self._along_axis_index(index, axis, values.shape)
        top = np.zeros(shape, values.dtype)
        np.maximum.at(top, where, values)
        terms = np.zeros(shape, values.dtype)
        np.add.at(terms, where, 1)
        return top + np.maximum(terms - 1, 0)


@lru_cache(maxsize=1)
def rounding_backend():
    """The rounding-count backend (one instance): a subclass of the reference's class."""
    base = type(get_backend("numpy"))

    return type("RoundingBackend", (_Roundings, base), {})()
