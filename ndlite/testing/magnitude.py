"""The "S" of the scaled tolerance: an op and its VJP evaluated on magnitudes.

DESIGN.md's policy bounds a float32 result's error by 8 eps S, where S is the same op applied
to the absolute values of its inputs in float64 (`|A| @ |B|` for matmul). Running the op on
|inputs| alone is not quite a bound once the op subtracts (`a - b` on magnitudes is not
`|a| + |b|`), so the kit runs it on the magnitude backend: the float64 reference whose float
primitives are replaced by their running-error-analysis counterparts,

    sub(a, b) -> |a| + |b|     neg(x) -> |x|     log(x) -> |log x|
    add, mul, div, pow, matmul -> on the absolute values of their operands (scalars too)
    from_numpy -> |array|: inputs and constants (a second-order cotangent) enter as magnitudes

and whose decisions are the reference's: comparisons, argmax/argmin and which operand of
maximum/minimum wins are replayed from a tape recorded by a run of the reference on the
values (`recording_backend`), so a max-pool's gradient lands where the reference put it.
The tape also holds the value of every denominator: a / b becomes S(a) / |b|, since a
denominator computed on magnitudes (a variance of |x|) would be too large and S too small.
Without a tape (or out of step with it), a selection takes the larger magnitude of its
operands and a division divides magnitudes. Integer buffers
(index arithmetic) and non-finite sentinels (a max-pool's -inf padding) are left alone. Fast
paths (conv2d, pooling, log_softmax) run their fallbacks, built from these primitives.

For the VJP it is fed |cotangent|, so a gradient that sums cotangent terms of both signs
(broadcasting, reductions) gets the sum of their magnitudes as its scale. The kit never lets
S fall below |reference|.

>>> import numpy as np
>>> m = magnitude_backend()
>>> m.to_numpy(m.sub(m.from_numpy(np.array([1.0, -2.0])), 3.0)).tolist()
[4.0, 5.0]
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..device.protocol import Backend
from ..device.registry import get_backend
from ..dtypes import is_floating
from .roundings import _fast_paths

#: primitives whose results are decisions, replayed from the reference's tape
DECISIONS = ("eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin")


def _is_float(x) -> bool:
    return isinstance(x, (float, np.floating)) or getattr(getattr(x, "dtype", None), "kind",
                                                             "") == "f"


def _mag(x):
    """|x| for a float buffer or a scalar; integer and bool buffers unchanged."""
    if isinstance(x, (bool, np.bool_)):
        return x
    if isinstance(x, (int, float, np.number)):
        return abs(x)
    return np.abs(x) if is_floating(x.dtype) else x


def _use_fallbacks(backend) -> None:
    """Route every fast path through its fallback (composed from the primitives)."""
    for name in _fast_paths():
        setattr(backend, name, getattr(Backend, name).__get__(backend))


@lru_cache(maxsize=1)
def recording_backend():
    """The reference on values, fast paths through their fallbacks (so its primitive calls
    match the magnitude backend's one for one), recording every decision on `tape`."""
    base = type(get_backend("numpy"))

    class RecordingBackend(base):
        kind = name = "recording"

        def __init__(self):
            super().__init__()
            self.tape: list = []
            for name in DECISIONS:
                setattr(self, name, self._recorded(name, getattr(self, name)))
            for name, pick in (("maximum", np.greater_equal), ("minimum", np.less_equal)):
                setattr(self, name, self._chooser(name, getattr(self, name), pick))
            divide = self.div

            def div(a, b):
                if _is_float(a) or _is_float(b):  # the denominator's value
                    self.tape.append(("div", np.array(b, dtype=np.float64)))
                return divide(a, b)

            self.div = div
            _use_fallbacks(self)

        def _recorded(self, name, primitive):
            def call(*args):
                out = primitive(*args)
                self.tape.append((name, np.array(out, copy=True)))
                return out

            return call

        def _chooser(self, name, primitive, pick):
            def call(a, b):
                if _is_float(a) or _is_float(b):  # which operand won, elementwise
                    with np.errstate(invalid="ignore"):
                        self.tape.append((name, np.asarray(pick(a, b) | np.isnan(a))))
                return primitive(a, b)

            return call

    return RecordingBackend()


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


def _larger(a, b, chosen):
    """The larger magnitude of a and b where both are finite, else `chosen` (a sentinel)."""
    with np.errstate(invalid="ignore"):
        larger = np.maximum(np.abs(a), np.abs(b))
    finite = np.isfinite(a) & np.isfinite(b)
    return np.where(finite, larger, chosen).astype(np.asarray(chosen).dtype)


class _Magnitudes:
    """The magnitude backend's behaviour, mixed over the reference's class."""

    kind = name = "magnitude"

    def __init__(self):
        super().__init__()
        self.tape: list = []
        self.in_step = False  # decisions come from a tape that matches this run
        # the reference binds its elementwise primitives per instance; rebind ours
        self.add = _binary(self.add, np.add)
        self.sub = _binary(self.sub, np.add)
        self.mul = _binary(self.mul, np.multiply)
        self.div = self._divided(_binary(self.div, np.true_divide))
        self.pow = _binary(self.pow, np.power)
        self.neg = _unary(self.neg, lambda x: x)
        self.log = _unary(self.log, lambda x: np.abs(np.log(x)))
        for name in DECISIONS:
            setattr(self, name, self._replayed(name, getattr(self, name)))
        for name in ("maximum", "minimum"):
            setattr(self, name, self._chosen(name, getattr(self, name)))
        _use_fallbacks(self)

    def replay(self, tape: list) -> None:
        """Take decisions from `tape` (a recording of the same computation on values)."""
        self.tape = list(reversed(tape))
        self.in_step = True

    def _next(self, name, shape):
        if self.tape and self.tape[-1][0] == name and self.tape[-1][1].shape == shape:
            return self.tape.pop()[1]
        self.tape, self.in_step = [], False  # out of step: decide on magnitudes
        return None

    def _replayed(self, name, primitive):
        def call(*args):
            out = primitive(*args)
            recorded = self._next(name, np.shape(out))
            return out if recorded is None else recorded.astype(out.dtype)

        return call

    def _divided(self, on_magnitudes):
        def div(a, b):
            if not (_is_float(a) or _is_float(b)):
                return on_magnitudes(a, b)
            denominator = self._next("div", np.shape(b))
            if denominator is None:
                return on_magnitudes(a, b)
            with np.errstate(all="ignore"):  # the terms of a over the true denominator
                return np.asarray(np.true_divide(_mag(a), np.abs(denominator)))

        return div

    def _chosen(self, name, primitive):
        def call(a, b):
            if not (_is_float(a) or _is_float(b)):
                return primitive(a, b)
            chosen = np.asarray(primitive(a, b))
            first = self._next(name, chosen.shape)
            if first is None:
                return _larger(a, b, chosen)
            return np.asarray(np.where(first, a, b)).astype(chosen.dtype)

        return call

    def from_numpy(self, array):
        # inputs and constants enter as magnitudes (sentinels such as -inf stay)
        if is_floating(array.dtype):
            array = np.where(np.isfinite(array), np.abs(array), array)
        return super().from_numpy(array)

    def matmul(self, a, b):
        return super().matmul(_mag(a), _mag(b))

    def where(self, cond, a, b):
        chosen = super().where(cond, a, b)
        if (_is_float(a) or _is_float(b)) and not self.in_step:
            return _larger(a, b, chosen)  # cond was decided on magnitudes
        return chosen


@lru_cache(maxsize=1)
def magnitude_backend():
    """The magnitude backend (one instance): a subclass of the reference's class."""
    base = type(get_backend("numpy"))

    return type("MagnitudeBackend", (_Magnitudes, base), {})()
