"""More elementwise math, one line each (the table style of unary.py): trigonometric and
hyperbolic functions, logs and exponentials of other bases, erfc, and the classifications
isnan/isinf/isfinite. Each runs the optional primitive `math(name, x)` (protocol.py; the
names are ndlite/device/hostmath.py's), so every backend computes it on its device.

Activations that PyTorch users reach for (softplus, silu, elu, hardtanh, logsigmoid) and small
identities (square, reciprocal, rsqrt) are composed from ops, with the gradients of those.
"""

from __future__ import annotations

import math as _math

from ..dtypes import as_dtype, is_floating
from ..errors import DTypeError
from ..tensor import Tensor
from .autocast import autocast_op
from .dispatch import binary, unary, unbroadcast
from .elementwise import where
from .registry import EXACT, TRANSCENDENTAL, Spec, declare, define
from .samples import BINARY, UNARY
from .unary import exp, sigmoid, sqrt

T = TRANSCENDENTAL
POSITIVE = (0.05, 4.0)
INSIDE_ONE = (-0.9, 0.9)


def _function(op, doc: str):
    def apply(x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{op.name}: expected a tensor, got {type(x).__name__}")
        return unary(op, x)

    apply.__name__ = apply.__qualname__ = op.name
    apply.__doc__ = doc
    op.function = apply
    return apply


def _by_name(name: str, backward, doc: str, domain=(-2.0, 2.0), save="inputs", second=False):
    """A float op over math(name, x): integers compute in float32, as in PyTorch."""
    op = define(name, lambda b, x: b.math(name, x), backward, save=save, dtype_rule="float",
                spec=Spec(UNARY, tol=T, domain=domain, second_order=second))
    return _function(op, doc)


def _x(node):
    return node.saved[0]


sin = _by_name("sin", lambda n, g: g * cos(_x(n)), "Sine.", second=True)
cos = _by_name("cos", lambda n, g: -g * sin(_x(n)), "Cosine.", second=True)
tan = _by_name("tan", lambda n, g: g * (1 + n.output() * n.output()), "Tangent.",
            domain=(-1.2, 1.2), save="output")
sinh = _by_name("sinh", lambda n, g: g * cosh(_x(n)), "Hyperbolic sine.")
cosh = _by_name("cosh", lambda n, g: g * sinh(_x(n)), "Hyperbolic cosine.")
asin = _by_name("asin", lambda n, g: g / sqrt(1 - _x(n) * _x(n)), "Inverse sine.",
             domain=INSIDE_ONE)
acos = _by_name("acos", lambda n, g: -g / sqrt(1 - _x(n) * _x(n)), "Inverse cosine.",
             domain=INSIDE_ONE)
atan = _by_name("atan", lambda n, g: g / (1 + _x(n) * _x(n)), "Inverse tangent.")
log1p = _by_name("log1p", lambda n, g: g / (1 + _x(n)), "log(1 + x), exact for small x.",
              domain=(-0.5, 4.0))
expm1 = _by_name("expm1", lambda n, g: g * (n.output() + 1), "exp(x) - 1, exact for small x.",
              save="output")
log2 = _by_name("log2", lambda n, g: g / (_x(n) * _math.log(2)), "Base-2 logarithm.",
             domain=POSITIVE)
log10 = _by_name("log10", lambda n, g: g / (_x(n) * _math.log(10)), "Base-10 logarithm.",
              domain=POSITIVE)
exp2 = _by_name("exp2", lambda n, g: g * n.output() * _math.log(2), "2 ** x.", save="output")
erfc = _by_name("erfc", lambda n, g: g * exp(-_x(n) * _x(n)) * (-2 / _math.sqrt(_math.pi)),
             "1 - erf(x), exact in the tail.")
arcsin, arccos, arctan = asin, acos, atan

# classifications: bool results, no gradient
CLASSIFY = Spec(UNARY, tol=EXACT, grad=False)
isnan = _function(define("isnan", lambda b, x: b.math("isnan", x), spec=CLASSIFY), "x != x")
isinf = _function(define("isinf", lambda b, x: b.math("isinf", x), spec=CLASSIFY),
                  "Whether x is +inf or -inf.")
isfinite = _function(define("isfinite", lambda b, x: b.math("isfinite", x), spec=CLASSIFY),
                     "Neither NaN nor infinite.")


def _atan2_grad(node, grad):
    y, x = node.saved
    r2 = x * x + y * y
    r2 = where(r2 == 0, 1.0, r2)  # at the origin x and y are 0: PyTorch's gradient 0, not NaN
    gy = unbroadcast(grad * x / r2, node.shapes[0]) if node.next[0] is not None else None
    gx = unbroadcast(-grad * y / r2, node.shapes[1]) if node.next[1] is not None else None
    return gy, gx


Atan2 = define("atan2", lambda b, y, x: b.math2("atan2", y, x), _atan2_grad, save="inputs",
               dtype_rule="float", spec=Spec(BINARY, tol=T, domain=(0.25, 2.0)))


def atan2(input, other) -> Tensor:
    """The angle of the point (other, input): atan(input / other) in the right quadrant.

    >>> import ndlite
    >>> round(ndlite.atan2(ndlite.tensor(1.0), ndlite.tensor(-1.0)).item(), 4)
    2.3562
    """
    return binary(Atan2, input, other)


Atan2.function = atan2
arctan2 = atan2


# ---- composed ---------------------------------------------------------------------------------


def _float(x: Tensor, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if x.dtype.kind == "b":
        raise DTypeError(f"{op}: not supported on bool tensors")
    return x if is_floating(x.dtype) else x.to(as_dtype("float32"))


def square(x: Tensor) -> Tensor:
    """x * x"""
    return x * x


@autocast_op("reciprocal")
def reciprocal(x: Tensor) -> Tensor:
    """1 / x"""
    return 1 / _float(x, "reciprocal")


@autocast_op("rsqrt")
def rsqrt(x: Tensor) -> Tensor:
    """1 / sqrt(x)"""
    return 1 / sqrt(_float(x, "rsqrt"))


@autocast_op("softplus")
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch's rule)."""
    x = _float(input, "softplus")
    z = x * beta
    soft = log1p(exp(where(z > threshold, 0.0, z))) / beta
    return where(z > threshold, x, soft)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (also called swish)."""
    x = _float(input, "silu")
    return x * sigmoid(x)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha (exp(x) - 1)."""
    x = _float(input, "elu")
    return where(x > 0, x, expm1(where(x > 0, 0.0, x)) * alpha)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val]; its gradient is 1 strictly inside only, 0 at the
    bounds (PyTorch's hardtanh, where clamp's is 1 there too)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} is above max_val {max_val}")
    x = _float(input, "hardtanh")
    return where(x <= min_val, min_val, where(x >= max_val, max_val, x))


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), without overflow."""
    x = _float(input, "logsigmoid")
    return -softplus(-x)


declare("square", Spec(UNARY, second_order=True), square)
declare("reciprocal", Spec(UNARY, tol=T, domain=POSITIVE), reciprocal)
declare("rsqrt", Spec(UNARY, tol=T, domain=POSITIVE), rsqrt)
declare("softplus", Spec(UNARY, tol=T, domain=(-6.0, 6.0)), softplus)
declare("silu", Spec(UNARY, tol=T, second_order=True), silu)
declare("elu", Spec(UNARY, tol=T, kinks="zero"), elu)
declare("hardtanh", Spec(UNARY, tol=EXACT, kinks="bounds", params={"min": -0.5, "max": 0.5},
                         call=lambda x, min, max: hardtanh(x, min, max)), hardtanh)
declare("logsigmoid", Spec(UNARY, tol=T, domain=(-6.0, 6.0)), logsigmoid)
