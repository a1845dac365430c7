"""The "S" of the scaled tolerance: an op and its VJP evaluated on magnitudes.

DESIGN.md's policy bounds a float32 result's error by 8 eps S, where S is the same op applied
to the absolute values of its inputs in float64 (`|A| @ |B|` for matmul). Running the op on
|inputs| alone is not quite a bound once the op subtracts (`a - b` on magnitudes is not
`|a| + |b|`), so the kit runs it on the magnitude backend: the float64 reference whose float
primitives are replaced by their running-error-analysis counterparts,

    sub(a, b) -> |a| + |b|     neg(x) -> |x|     log(x) -> |log x|
    add, mul, div, pow -> on the absolute values of their operands (scalars included)
    where, maximum, minimum -> the larger magnitude of the two (the comparison deciding
                               between them was made on magnitudes, not values)

while index arithmetic (integer buffers) is left alone, and so are sentinels: a max-pool's
-inf padding keeps its sign (pad, full, max and non-finite selections are untouched).
Fast paths (conv2d, pooling, log_softmax) run their fallbacks, built from these primitives. For the VJP it is fed |cotangent|, so a
gradient that sums cotangent terms of both signs (broadcasting, reductions) gets the sum of
their magnitudes as its scale. The kit never lets S fall below |reference|.

>>> import numpy as np, ndlite
>>> m = magnitude_backend()
>>> m.to_numpy(m.sub(m.from_numpy(np.array([1.0, -2.0])), 3.0)).tolist()
[4.0, 5.0]
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..device.protocol import Backend
from ..device.registry import get_backend
from .roundings import _fast_paths


def _is_float(x) -> bool:
    return isinstance(x, (float, np.floating)) or getattr(getattr(x, "dtype", None), "kind",
                                                             "") == "f"


def _mag(x):
    """|x| for a float buffer or a scalar; integer and bool buffers unchanged."""
    if isinstance(x, (bool, np.bool_)):
        return x
    if isinstance(x, (int, float, np.number)):
        return abs(x)
    return np.abs(x) if x.dtype.kind == "f" else x


def _binary(original, replacement):
    """`replacement` on magnitudes when any operand is a float buffer, else `original`.
    (pow keeps its exponent's sign: only the base becomes a magnitude.)"""

    def call(a, b):
        if _is_float(a) or _is_float(b):
            with np.errstate(all="ignore"):
                if replacement is np.power:
                    return np.asarray(np.power(_mag(a), b))
                return np.asarray(replacement(_mag(a), _mag(b)))
        return original(a, b)

    return call


def _unary(original, replacement):
    def call(x):
        if _is_float(x):
            with np.errstate(all="ignore"):
                return np.asarray(replacement(_mag(x)))
        return original(x)

    return call


def _either(select):
    """A selection between float operands on magnitudes: the comparison that picks one was
    made on magnitudes too, so either may be the one the reference picked; take the larger.
    Non-finite operands (a max-pool's -inf padding) are sentinels: `select` decides there."""

    def call(a, b):
        if not (_is_float(a) or _is_float(b)):
            return select(a, b)
        chosen = np.asarray(select(a, b))
        with np.errstate(invalid="ignore"):
            larger = np.maximum(np.abs(a), np.abs(b))
        finite = np.isfinite(a) & np.isfinite(b)
        return np.where(finite, larger, chosen).astype(chosen.dtype)

    return call


@lru_cache(maxsize=1)
def magnitude_backend():
    """The magnitude backend (one instance): a subclass of the reference's class."""
    base = type(get_backend("numpy"))

    class MagnitudeBackend(base):
        kind = name = "magnitude"

        def __init__(self):
            super().__init__()
            # the reference binds its elementwise primitives per instance; rebind ours
            self.add = _binary(self.add, np.add)
            self.sub = _binary(self.sub, np.add)
            self.mul = _binary(self.mul, np.multiply)
            self.div = _binary(self.div, np.true_divide)
            self.pow = _binary(self.pow, np.power)
            self.neg = _unary(self.neg, lambda x: x)
            self.log = _unary(self.log, lambda x: np.abs(np.log(x)))
            self.maximum = _either(self.maximum)
            self.minimum = _either(self.minimum)
            for name in _fast_paths():  # their fallbacks, built from the primitives above
                setattr(self, name, getattr(Backend, name).__get__(self))

        def where(self, cond, a, b):
            return _either(lambda a, b: super(MagnitudeBackend, self).where(cond, a, b))(a, b)

    return MagnitudeBackend()
