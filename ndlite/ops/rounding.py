"""Rounding and integer-style division with PyTorch's names and sign conventions: floor, ceil,
round (half to even, or to `decimals`), trunc, frac; fmod (the sign of the dividend),
remainder and `%` (the sign of the divisor), floor_divide and `//`, and
div(rounding_mode=None | "trunc" | "floor").

Rounding runs the optional primitive `math(name, x)` (integers pass through unchanged);
fmod of floats is `math2("fmod", a, b)`, exact on every backend, and remainder / floor_divide
of floats are composed from it as NumPy and PyTorch compute them (so they agree to the bit);
integers use `math2("remainder" | "floor_divide")` (x by 0 gives 0, as NumPy does).
"""

from __future__ import annotations

from ..dtypes import is_floating
from ..errors import DTypeError
from ..tensor import Tensor
from .binary import div as true_div
from .dispatch import binary, unary, unbroadcast
from .elementwise import where
from .registry import EXACT, Spec, define, implements
from .samples import BINARY, UNARY

ROUNDING = Spec(UNARY, tol=EXACT, grad=False, domain=(-4.0, 4.0))


def _rounding(name: str, doc: str):
    op = define(name, lambda b, x: b.math(name, x) if is_floating(x.dtype) else b.copy(x),
                lambda n, g: g * 0, spec=ROUNDING, dtype_rule="no_bool")

    def apply(x: Tensor) -> Tensor:
        return unary(op, x)

    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = doc
    op.function = apply
    return apply


floor = _rounding("floor", "The largest integer <= x (integers unchanged); zero gradient.")
ceil = _rounding("ceil", "The smallest integer >= x.")
trunc = _rounding("trunc", "x rounded toward zero.")
_rint = _rounding("round", "x rounded to the nearest integer, ties to even.")
fix = trunc


def round(input: Tensor, decimals: int = 0) -> Tensor:  # noqa: A001 - torch.round
    """x rounded half to even, to `decimals` places (PyTorch's torch.round).

    >>> import ndlite
    >>> ndlite.round(ndlite.tensor([0.5, 1.5, 2.25]), decimals=0).tolist()
    [0.0, 2.0, 2.0]
    """
    if decimals == 0:
        return _rint(input)
    scale = 10.0 ** decimals
    return _rint(input * scale) / scale


def frac(input: Tensor) -> Tensor:
    """x - trunc(x): the fractional part, with x's sign."""
    return input - trunc(input)


# ---- division with rounding -------------------------------------------------------------------


def _fmod_grad(node, grad):
    a, b = node.saved
    ga = unbroadcast(grad, node.shapes[0]) if node.next[0] is not None else None
    gb = None
    if node.next[1] is not None:
        gb = unbroadcast(-grad * trunc(a / b), node.shapes[1])
    return ga, gb


Fmod = define("fmod", lambda bk, a, b: bk.math2("fmod", a, b), _fmod_grad, save="inputs",
              dtype_rule="no_bool", spec=Spec(BINARY, tol=EXACT, grad=False,
                                              params={"divisor_min": 0.25}))


@implements(Fmod)
def fmod(input, other) -> Tensor:
    """The remainder of input / other with the sign of input (C's fmod).

    >>> import ndlite
    >>> ndlite.fmod(ndlite.tensor([-3.0, 3.0]), 2).tolist()
    [-1.0, 1.0]
    """
    return binary(Fmod, input, other)


IntRemainder = define("int_remainder", lambda bk, a, b: bk.math2("remainder", a, b),
                      spec=Spec(BINARY, tol=EXACT, grad=False, dtypes=("int64",),
                                params={"divisor_min": 1}), dtype_rule="integral")
IntFloorDivide = define("int_floor_divide", lambda bk, a, b: bk.math2("floor_divide", a, b),
                        spec=Spec(BINARY, tol=EXACT, grad=False, dtypes=("int64",),
                                  params={"divisor_min": 1}), dtype_rule="integral")


def _is_integral(a, b) -> bool:
    tensors = [t for t in (a, b) if isinstance(t, Tensor)]
    if not tensors:
        raise TypeError("needs at least one tensor operand")
    for t in tensors:
        if t.dtype.kind == "b":
            raise DTypeError(f"division of bool tensors (shape {t.shape}): cast first")
    return all(t.dtype.kind in "iu" for t in tensors) and not any(
        isinstance(v, float) for v in (a, b))


def _as_tensor_like(value, like: Tensor) -> Tensor:
    return value if isinstance(value, Tensor) else like.new_full((), value)


def remainder(input, other) -> Tensor:
    """input - floor(input / other) * other: the sign of the divisor, as Python's %.

    >>> import ndlite
    >>> ndlite.remainder(ndlite.tensor([-3.0, 3.0]), 2).tolist()
    [1.0, 1.0]
    """
    if _is_integral(input, other):
        return binary(IntRemainder, input, other)
    mod = fmod(input, other)
    divisor = _as_tensor_like(other, mod)
    adjust = (mod != 0) & ((divisor < 0) != (mod < 0))
    return where(adjust, mod + divisor, mod)


def floor_divide(input, other) -> Tensor:
    """floor(input / other), computed as Python's // (through fmod, exact); no gradient.

    >>> import ndlite
    >>> ndlite.floor_divide(ndlite.tensor([-3.0, 3.0]), 2).tolist()
    [-2.0, 1.0]
    """
    if _is_integral(input, other):
        return binary(IntFloorDivide, input, other)
    mod = fmod(input, other).detach()
    a = _as_tensor_like(input, mod).detach()
    b = _as_tensor_like(other, mod).detach()
    quotient = (a - mod) / b
    quotient = where((mod != 0) & ((b < 0) != (mod < 0)), quotient - 1, quotient)
    result = floor(quotient)
    result = where(quotient - result > 0.5, result + 1, result)
    zero = (a / b) * 0  # 0 with the quotient's sign; NaN or inf where b == 0
    return where(quotient == 0, zero, where(b == 0, a / b, result))


def div(input, other, *, rounding_mode: str | None = None) -> Tensor:
    """input / other; rounding_mode "trunc" rounds toward zero, "floor" toward -inf
    (integers stay integers then).

    >>> import ndlite
    >>> ndlite.div(ndlite.tensor([-7, 7]), 2, rounding_mode="trunc").tolist()
    [-3, 3]
    """
    if rounding_mode is None:
        return true_div(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode != "trunc":
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}")
    if _is_integral(input, other):
        floored = floor_divide(input, other)
        a, b = _as_tensor_like(input, floored), _as_tensor_like(other, floored)
        inexact = remainder(input, other) != 0
        return where(inexact & ((a < 0) != (b < 0)), floored + 1, floored)
    return trunc(true_div(input, other))


true_divide = divide = true_div
IntRemainder.function, IntFloorDivide.function = remainder, floor_divide
