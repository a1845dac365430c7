"""Elementwise ops of two operands with broadcasting (either may be a Python number):
arithmetic, maximum/minimum, comparisons and logic, and clamp.

Each op is one declaration: forward over a backend primitive, backward in Tensor ops (a
gradient is summed back to its input's shape with `unbroadcast`), spec. Where an input needs
no gradient (`node.next[i] is None`) its formula is skipped.
"""

from __future__ import annotations

import math

from ..dtypes import as_dtype, bool_, is_floating
from ..errors import DTypeError
from ..tensor import Tensor
from .dispatch import binary, unary, unbroadcast
from .elementwise import where
from .registry import EXACT, TRANSCENDENTAL, Op, Spec, define, implements, register
from .samples import BINARY, UNARY


def _wants(node, i: int) -> bool:
    return node.next[i] is not None


def _add_grad(node, grad):
    return unbroadcast(grad, node.shapes[0]), unbroadcast(grad, node.shapes[1])


def _sub_grad(node, grad):
    gy = -unbroadcast(grad, node.shapes[1]) if _wants(node, 1) else None
    return unbroadcast(grad, node.shapes[0]), gy


def _mul_grad(node, grad):
    x, y = node.saved
    gx = unbroadcast(grad * y, node.shapes[0]) if _wants(node, 0) else None
    gy = unbroadcast(grad * x, node.shapes[1]) if _wants(node, 1) else None
    return gx, gy


def _div_grad(node, grad):
    x, y = node.saved
    gx = unbroadcast(grad / y, node.shapes[0]) if _wants(node, 0) else None
    gy = unbroadcast(-(grad * x) / (y * y), node.shapes[1]) if _wants(node, 1) else None
    return gx, gy


def _pow_grad(node, grad):
    # PyTorch's masks: d/dx is 0 where y == 0 (not 0 * inf at x = 0), d/dy is 0 where x == 0
    # and y >= 0 (not 0 * log(0)); x ** y is recomputed rather than saved, so changing the
    # output in place afterwards is no error
    x, y = node.saved
    gx = gy = None
    if _wants(node, 0):
        if isinstance(y, Tensor):
            gx = unbroadcast(where(y == 0, 0.0, grad * y * x ** (y - 1)), node.shapes[0])
        else:
            gx = grad * 0 if y == 0 else grad * y * x ** (y - 1)
    if _wants(node, 1):
        if isinstance(x, Tensor):
            gy = where((x == 0) & (y >= 0), 0.0, grad * x ** y * x.log())
        else:  # a number to a tensor power: 2.0 ** t
            log_x = math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
            gy = where(y >= 0, 0.0, grad * x ** y * log_x) if x == 0 else grad * x ** y * log_x
        gy = unbroadcast(gy, node.shapes[1])
    return gx, gy


def _tie_split(grad, win, tie):
    # where the inputs tie, each gets half of the gradient (PyTorch's convention)
    return where(win, grad, where(tie, grad * 0.5, 0.0))


def _maximum_grad(node, grad):
    x, y = node.saved
    tie = x == y
    return (unbroadcast(_tie_split(grad, x > y, tie), node.shapes[0]),
            unbroadcast(_tie_split(grad, y > x, tie), node.shapes[1]))


def _minimum_grad(node, grad):
    x, y = node.saved
    tie = x == y
    return (unbroadcast(_tie_split(grad, x < y, tie), node.shapes[0]),
            unbroadcast(_tie_split(grad, y < x, tie), node.shapes[1]))


Add = define("add", lambda b, x, y: b.add(x, y), _add_grad, spec=Spec(BINARY, half_tol=EXACT))
Sub = define("sub", lambda b, x, y: b.sub(x, y), _sub_grad, dtype_rule="no_bool",
             spec=Spec(BINARY, bound=lambda a, b: a + b, half_tol=EXACT))
Mul = define("mul", lambda b, x, y: b.mul(x, y), _mul_grad, save="inputs",
             spec=Spec(BINARY, second_order=True, half_tol=EXACT))
Div = define("div", lambda b, x, y: b.div(x, y), _div_grad, save="inputs", dtype_rule="float",
             spec=Spec(BINARY, params={"divisor_min": 0.25}, bound=lambda a, b: a / b + a / b,
                       half_tol=EXACT))
Pow = define("pow", lambda b, x, y: b.pow(x, y), _pow_grad, save="inputs", dtype_rule="no_bool",
             spec=Spec(BINARY, tol=TRANSCENDENTAL, domain=(0.25, 2.0),
                       params={"exponent": (-2, 3)}))
# x * y: x's gradient reads y and y's reads x; x / y: x's reads y, y's reads both. A Python
# number is kept always (it cannot change)
Mul.save_for = staticmethod(lambda needs: tuple(i for i in (0, 1) if needs[1 - i]))
Div.save_for = staticmethod(lambda needs: (0, 1) if needs[1] else (1,))
Maximum = define("maximum", lambda b, x, y: b.maximum(x, y), _maximum_grad, save="inputs",
                 spec=Spec(BINARY, tol=EXACT, kinks="pair"))
Minimum = define("minimum", lambda b, x, y: b.minimum(x, y), _minimum_grad, save="inputs",
                 spec=Spec(BINARY, tol=EXACT, kinks="pair"))

# comparisons: no gradient, bool results
COMPARE = Spec(BINARY, tol=EXACT, grad=False)
Eq = define("eq", lambda b, x, y: b.eq(x, y), spec=COMPARE)
Ne = define("ne", lambda b, x, y: b.ne(x, y), spec=COMPARE)
Lt = define("lt", lambda b, x, y: b.lt(x, y), spec=COMPARE)
Le = define("le", lambda b, x, y: b.le(x, y), spec=COMPARE)
Gt = define("gt", lambda b, x, y: b.gt(x, y), spec=COMPARE)
Ge = define("ge", lambda b, x, y: b.ge(x, y), spec=COMPARE)


@implements(Add)
def add(a, b) -> Tensor:
    """a + b, with broadcasting; either may be a Python number."""
    return binary(Add, a, b)


@implements(Sub)
def sub(a, b) -> Tensor:
    """a - b"""
    return binary(Sub, a, b)


def rsub(a, b) -> Tensor:
    return binary(Sub, b, a)


@implements(Mul)
def mul(a, b) -> Tensor:
    """a * b"""
    return binary(Mul, a, b)


@implements(Div)
def div(a, b) -> Tensor:
    """a / b (true division: integers divide to float32)."""
    return binary(Div, a, b)


def rdiv(a, b) -> Tensor:
    return binary(Div, b, a)


@implements(Pow)
def pow(a, b) -> Tensor:  # noqa: A001 - torch.pow
    """a ** b"""
    if isinstance(a, Tensor) and a.dtype.kind in "iu" and isinstance(b, int) and b < 0:
        raise DTypeError(f"pow: integers to negative integer powers are not allowed "
                         f"(tensor of shape {a.shape} ** {b}); use a float tensor")
    return binary(Pow, a, b)


def rpow(a, b) -> Tensor:
    return binary(Pow, b, a)


@implements(Maximum)
def maximum(a, b) -> Tensor:
    """Elementwise maximum."""
    return binary(Maximum, a, b)


@implements(Minimum)
def minimum(a, b) -> Tensor:
    """Elementwise minimum."""
    return binary(Minimum, a, b)


@implements(Eq)
def eq(a, b) -> Tensor:
    return binary(Eq, a, b)


@implements(Ne)
def ne(a, b) -> Tensor:
    return binary(Ne, a, b)


@implements(Lt)
def lt(a, b) -> Tensor:
    return binary(Lt, a, b)


@implements(Le)
def le(a, b) -> Tensor:
    return binary(Le, a, b)


@implements(Gt)
def gt(a, b) -> Tensor:
    return binary(Gt, a, b)


@implements(Ge)
def ge(a, b) -> Tensor:
    return binary(Ge, a, b)


# ---- logic on bool tensors --------------------------------------------------------------------


def _logical_operands(op, a, b):
    for t in (a, b):
        if isinstance(t, Tensor) and t.dtype is not bool_:
            raise DTypeError(f"{op}: needs bool tensors, got {t.dtype} (shape {t.shape}); "
                             "compare first, e.g. (x > 0) & (y > 0), or call logical_and "
                             "and the like (they read nonzero as true; ndlite has no bitwise "
                             "ops)")


def _truth(t):
    """t as PyTorch's logical functions read it: any dtype, nonzero (or NaN) true; a Python
    number as a bool."""
    if not isinstance(t, Tensor):
        return bool(t)
    return ne(t, 0) if t.dtype is not bool_ else t


def logical_and(a, b) -> Tensor:
    """a and b elementwise, as bool (any dtype: nonzero is true)."""
    return binary(Mul, _truth(a), _truth(b))


def logical_or(a, b) -> Tensor:
    """a or b elementwise, as bool (any dtype: nonzero is true)."""
    return binary(Maximum, _truth(a), _truth(b))


def logical_xor(a, b) -> Tensor:
    """a xor b elementwise, as bool (any dtype: nonzero is true)."""
    return binary(Ne, _truth(a), _truth(b))


def logical_not(a) -> Tensor:
    """not a elementwise, as bool (any dtype: zero is false)."""
    return binary(Eq, _truth(a), False)


def _bool_operator(fn, name: str):
    """The operator `name` (&, |, ^, ~) as `fn` on bool tensors; on integers PyTorch's
    operators are bitwise, which ndlite does not have, so they refuse rather than compute the
    logical result."""

    def operator(a, b=None):
        _logical_operands(name, a, b)
        return fn(a) if b is None else fn(a, b)

    operator.__name__ = name
    return operator


and_ = _bool_operator(logical_and, "&")
or_ = _bool_operator(logical_or, "|")
xor_ = _bool_operator(logical_xor, "^")
invert = _bool_operator(logical_not, "~")


# ---- clamp ------------------------------------------------------------------------------------


@register
class Clamp(Op):
    name = "clamp"
    spec = Spec(UNARY, tol=EXACT, kinks="bounds", params={"min": -0.5, "max": 0.5})
    save_inputs = True

    @staticmethod
    def forward(b, x, min=None, max=None):
        if min is not None:
            x = b.maximum(x, min)
        if max is not None:
            x = b.minimum(x, max)
        return x

    @staticmethod
    def backward(node, grad):
        x = node.saved[0]
        lo, hi = node.params.get("min"), node.params.get("max")
        inside = None
        if lo is not None:
            inside = x >= lo
        if hi is not None:
            inside = (x <= hi) if inside is None else logical_and(inside, x <= hi)
        return where(inside, grad, 0.0)


@implements(Clamp)
def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 - torch's names
    """x limited to [min, max]; bounds may be numbers or tensors.

    >>> import ndlite
    >>> ndlite.tensor([-2.0, 0.5, 3.0]).clamp(-1, 1).tolist()
    [-1.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        # PyTorch's rule: x where min <= x <= max (its gradient to x, ties included), a bound
        # where x passes it (or the bound is NaN), max where min > max
        out = x
        if min is not None:
            out = where(logical_or(out < min, ne(min, min)), min, out)
        if max is not None:
            out = where(logical_or(out > max, ne(max, max)), max, out)
        return out
    params = {}
    if min is not None:
        params["min"] = min
    if max is not None:
        params["max"] = max
    if not is_floating(x.dtype) and any(isinstance(v, float) for v in params.values()):
        x = x.to(as_dtype("float32"))
    return unary(Clamp, x, **params)


clip = clamp
