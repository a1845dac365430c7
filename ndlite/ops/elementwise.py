"""Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, where, clamp,
casts and transfers between backends.

Each op class holds its forward (backend primitives) and backward (Tensor ops) side by side;
the function below it is the public API.
"""

from __future__ import annotations

from .. import autograd, creation
from ..dtypes import as_dtype, bool_, promote, scalar_dtype
from ..errors import DTypeError
from ..tensor import Tensor
from .dispatch import as_scalar, binary, broadcast_shapes, check_same_backend, unary, unbroadcast
from .registry import EXACT, TRANSCENDENTAL, Op, Spec, register

# ---- unary ------------------------------------------------------------------------------------


@register
class Neg(Op):
    name = "neg"
    spec = Spec("unary", tol=EXACT)
    dtype_rule = "no_bool"

    @staticmethod
    def forward(b, x):
        return b.neg(x)

    @staticmethod
    def backward(node, grad):
        return -grad


def neg(x: Tensor) -> Tensor:
    """-x"""
    return unary(Neg, x)


@register
class Exp(Op):
    name = "exp"
    spec = Spec("unary", tol=TRANSCENDENTAL, second_order=True)
    save_output = True
    dtype_rule = "float"

    @staticmethod
    def forward(b, x):
        return b.exp(x)

    @staticmethod
    def backward(node, grad):
        return grad * node.output()


def exp(x: Tensor) -> Tensor:
    """e ** x"""
    return unary(Exp, x)


@register
class Log(Op):
    name = "log"
    spec = Spec("unary", tol=TRANSCENDENTAL, domain=(0.05, 4.0))
    save_inputs = True
    dtype_rule = "float"

    @staticmethod
    def forward(b, x):
        return b.log(x)

    @staticmethod
    def backward(node, grad):
        return grad / node.saved[0]


def log(x: Tensor) -> Tensor:
    """Natural logarithm."""
    return unary(Log, x)


@register
class Sqrt(Op):
    name = "sqrt"
    spec = Spec("unary", tol=TRANSCENDENTAL, domain=(0.05, 4.0))
    save_output = True
    dtype_rule = "float"

    @staticmethod
    def forward(b, x):
        return b.sqrt(x)

    @staticmethod
    def backward(node, grad):
        return grad / (node.output() * 2)


def sqrt(x: Tensor) -> Tensor:
    return unary(Sqrt, x)


@register
class Tanh(Op):
    name = "tanh"
    spec = Spec("unary", tol=TRANSCENDENTAL, second_order=True)
    save_output = True
    dtype_rule = "float"

    @staticmethod
    def forward(b, x):
        return b.tanh(x)

    @staticmethod
    def backward(node, grad):
        out = node.output()
        return grad * (1 - out * out)


def tanh(x: Tensor) -> Tensor:
    return unary(Tanh, x)


@register
class Sigmoid(Op):
    name = "sigmoid"
    spec = Spec("unary", tol=TRANSCENDENTAL, domain=(-6.0, 6.0))
    save_output = True
    dtype_rule = "float"

    @staticmethod
    def forward(b, x):
        return b.sigmoid(x)

    @staticmethod
    def backward(node, grad):
        out = node.output()
        return grad * out * (1 - out)


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + e ** -x), computed without overflow."""
    return unary(Sigmoid, x)


@register
class Relu(Op):
    name = "relu"
    spec = Spec("unary", tol=EXACT, kinks="zero")
    save_output = True
    dtype_rule = "no_bool"

    @staticmethod
    def forward(b, x):
        return b.relu(x)

    @staticmethod
    def backward(node, grad):
        # relu'(0) = 0: the gradient passes only where the output is positive
        return where(node.output() > 0, grad, 0.0)


def relu(x: Tensor) -> Tensor:
    """max(x, 0)"""
    return unary(Relu, x)


@register
class Abs(Op):
    name = "abs"
    spec = Spec("unary", tol=EXACT, kinks="zero")
    save_inputs = True
    dtype_rule = "no_bool"

    @staticmethod
    def forward(b, x):
        return b.abs(x)

    @staticmethod
    def backward(node, grad):
        return grad * sign(node.saved[0])


def abs(x: Tensor) -> Tensor:  # noqa: A001 - torch.abs
    return unary(Abs, x)


@register
class Sign(Op):
    name = "sign"
    spec = Spec("unary", tol=EXACT, kinks="zero")
    dtype_rule = "no_bool"

    @staticmethod
    def forward(b, x):
        return b.sign(x)

    @staticmethod
    def backward(node, grad):
        return grad * 0


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of x; its gradient is zero."""
    return unary(Sign, x)


# ---- binary arithmetic ------------------------------------------------------------------------


@register
class Add(Op):
    name = "add"
    spec = Spec("binary")

    @staticmethod
    def forward(b, x, y):
        return b.add(x, y)

    @staticmethod
    def backward(node, grad):
        return unbroadcast(grad, node.shapes[0]), unbroadcast(grad, node.shapes[1])


def add(a, b) -> Tensor:
    """a + b, with broadcasting; either may be a Python number."""
    return binary(Add, a, b)


@register
class Sub(Op):
    name = "sub"
    spec = Spec("binary", bound=lambda a, b: a + b)
    dtype_rule = "no_bool"

    @staticmethod
    def forward(b, x, y):
        return b.sub(x, y)

    @staticmethod
    def backward(node, grad):
        gy = -unbroadcast(grad, node.shapes[1]) if node.next[1] is not None else None
        return unbroadcast(grad, node.shapes[0]), gy


def sub(a, b) -> Tensor:
    """a - b"""
    return binary(Sub, a, b)


def rsub(a, b) -> Tensor:
    return binary(Sub, b, a)


@register
class Mul(Op):
    name = "mul"
    spec = Spec("binary", second_order=True)
    save_inputs = True

    @staticmethod
    def forward(b, x, y):
        return b.mul(x, y)

    @staticmethod
    def backward(node, grad):
        x, y = node.saved
        gx = unbroadcast(grad * y, node.shapes[0]) if node.next[0] is not None else None
        gy = unbroadcast(grad * x, node.shapes[1]) if node.next[1] is not None else None
        return gx, gy


def mul(a, b) -> Tensor:
    """a * b"""
    return binary(Mul, a, b)


@register
class Div(Op):
    name = "div"
    spec = Spec("binary", params={"divisor_min": 0.25},
                bound=lambda a, b: a / b + a / b)
    save_inputs = True
    dtype_rule = "float"

    @staticmethod
    def forward(b, x, y):
        return b.div(x, y)

    @staticmethod
    def backward(node, grad):
        x, y = node.saved
        gx = unbroadcast(grad / y, node.shapes[0]) if node.next[0] is not None else None
        gy = unbroadcast(-(grad * x) / (y * y), node.shapes[1]) if node.next[1] is not None \
            else None
        return gx, gy


def div(a, b) -> Tensor:
    """a / b (true division: integers divide to float32)."""
    return binary(Div, a, b)


def rdiv(a, b) -> Tensor:
    return binary(Div, b, a)


@register
class Pow(Op):
    name = "pow"
    spec = Spec("binary", tol=TRANSCENDENTAL, domain=(0.25, 2.0), params={"exponent": (-2, 3)})
    save_inputs = True
    save_output = True

    @staticmethod
    def forward(b, x, y):
        return b.pow(x, y)

    @staticmethod
    def backward(node, grad):
        x, y = node.saved
        gx = gy = None
        if node.next[0] is not None:
            if isinstance(y, Tensor):
                gx = unbroadcast(grad * y * x ** (y - 1), node.shapes[0])
            else:
                gx = grad * 0 if y == 0 else grad * y * x ** (y - 1)
        if node.next[1] is not None:
            gy = unbroadcast(grad * node.output() * log(x), node.shapes[1])
        return gx, gy


def pow(a, b) -> Tensor:  # noqa: A001 - torch.pow
    """a ** b"""
    if isinstance(a, Tensor) and a.dtype.kind in "iu" and isinstance(b, int) and b < 0:
        raise DTypeError(f"pow: integers to negative integer powers are not allowed "
                         f"(tensor of shape {a.shape} ** {b}); use a float tensor")
    return binary(Pow, a, b)


def rpow(a, b) -> Tensor:
    return binary(Pow, b, a)


def _tie_split(grad, win, tie):
    # where the inputs tie, each gets half of the gradient (PyTorch's convention)
    return where(win, grad, where(tie, grad * 0.5, 0.0))


@register
class Maximum(Op):
    name = "maximum"
    spec = Spec("binary", tol=EXACT, kinks="pair")
    save_inputs = True

    @staticmethod
    def forward(b, x, y):
        return b.maximum(x, y)

    @staticmethod
    def backward(node, grad):
        x, y = node.saved
        tie = x == y
        return (unbroadcast(_tie_split(grad, x > y, tie), node.shapes[0]),
                unbroadcast(_tie_split(grad, y > x, tie), node.shapes[1]))


def maximum(a, b) -> Tensor:
    """Elementwise maximum."""
    return binary(Maximum, a, b)


@register
class Minimum(Op):
    name = "minimum"
    spec = Spec("binary", tol=EXACT, kinks="pair")
    save_inputs = True

    @staticmethod
    def forward(b, x, y):
        return b.minimum(x, y)

    @staticmethod
    def backward(node, grad):
        x, y = node.saved
        tie = x == y
        return (unbroadcast(_tie_split(grad, x < y, tie), node.shapes[0]),
                unbroadcast(_tie_split(grad, y < x, tie), node.shapes[1]))


def minimum(a, b) -> Tensor:
    """Elementwise minimum."""
    return binary(Minimum, a, b)


# ---- comparisons and logic (no gradient) -----------------------------------------------------


def _comparison(name, primitive):
    cls = type(name.capitalize(), (Op,), {
        "name": name, "differentiable": False, "spec": Spec("binary", tol=EXACT, grad=False),
        "forward": staticmethod(lambda b, x, y: getattr(b, primitive)(x, y)),
    })
    return register(cls)


Eq, Ne = _comparison("eq", "eq"), _comparison("ne", "ne")
Lt, Le = _comparison("lt", "lt"), _comparison("le", "le")
Gt, Ge = _comparison("gt", "gt"), _comparison("ge", "ge")


def eq(a, b) -> Tensor:
    return binary(Eq, a, b)


def ne(a, b) -> Tensor:
    return binary(Ne, a, b)


def lt(a, b) -> Tensor:
    return binary(Lt, a, b)


def le(a, b) -> Tensor:
    return binary(Le, a, b)


def gt(a, b) -> Tensor:
    return binary(Gt, a, b)


def ge(a, b) -> Tensor:
    return binary(Ge, a, b)


def _logical_operands(op, a, b):
    for t in (a, b):
        if isinstance(t, Tensor) and t.dtype is not bool_:
            raise DTypeError(f"{op}: needs bool tensors, got {t.dtype} (shape {t.shape}); "
                             "compare first, e.g. (x > 0) & (y > 0)")


def logical_and(a, b) -> Tensor:
    """a & b on bool tensors."""
    _logical_operands("logical_and", a, b)
    return binary(Mul, a, b)


def logical_or(a, b) -> Tensor:
    """a | b on bool tensors."""
    _logical_operands("logical_or", a, b)
    return binary(Maximum, a, b)


def logical_xor(a, b) -> Tensor:
    """a ^ b on bool tensors."""
    _logical_operands("logical_xor", a, b)
    return binary(Ne, a, b)


def logical_not(a) -> Tensor:
    """~a on a bool tensor."""
    _logical_operands("logical_not", a, None)
    return binary(Eq, a, False)


# ---- where, clamp -----------------------------------------------------------------------------


@register
class Where(Op):
    name = "where"
    spec = Spec("where", tol=EXACT)
    save_inputs = True

    @staticmethod
    def forward(b, cond, x, y):
        return b.where(cond, x, y)

    @staticmethod
    def backward(node, grad):
        cond = node.saved[0]
        gx = unbroadcast(where(cond, grad, 0.0), node.shapes[1]) if node.next[1] is not None \
            else None
        gy = unbroadcast(where(cond, 0.0, grad), node.shapes[2]) if node.next[2] is not None \
            else None
        return None, gx, gy


def where(condition: Tensor, x, y) -> Tensor:
    """`x` where `condition` is true, else `y`; all three broadcast, x/y may be numbers.

    >>> import ndlite
    >>> t = ndlite.tensor([-1.0, 2.0])
    >>> ndlite.where(t > 0, t, 0.0).tolist()
    [0.0, 2.0]
    """
    if not isinstance(condition, Tensor) or condition.dtype is not bool_:
        raise DTypeError("where: condition must be a bool tensor, got "
                         f"{getattr(condition, 'dtype', type(condition).__name__)}")
    branches = []
    for v in (x, y):
        if not isinstance(v, Tensor):
            s = as_scalar(v, "where")
            if s is None:
                raise TypeError(f"where: cannot use a {type(v).__name__} as a branch")
            v = s
        branches.append(v)
    tensors = [v for v in branches if isinstance(v, Tensor)]
    if not tensors:  # two numbers: the first becomes a tensor of its natural dtype
        branches[0] = creation.full_like(condition, branches[0],
                                dtype=scalar_dtype(bool_, branches[0]))
        tensors = [branches[0]]
    check_same_backend("where", condition, *tensors)
    dtype = tensors[0].dtype if len(tensors) == 1 else promote(tensors[0].dtype, tensors[1].dtype)
    for v in branches:
        if not isinstance(v, Tensor):
            dtype = scalar_dtype(dtype, v)
    shape = condition.shape
    for i, v in enumerate(branches):
        if isinstance(v, Tensor):
            branches[i] = v = astype(v, dtype)
            shape = broadcast_shapes(shape, v.shape, "where")
    buffers = [v._data if isinstance(v, Tensor) else v for v in branches]
    out = Tensor._make(Where.forward(condition._backend, condition._data, *buffers),
                       condition._backend)
    if autograd.grad_enabled and any(isinstance(v, Tensor) and v._rg for v in branches):
        autograd.record(Where, (condition, *branches), out)
    return out


@register
class Clamp(Op):
    name = "clamp"
    spec = Spec("unary", tol=EXACT, kinks="bounds", params={"min": -0.5, "max": 0.5})
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


def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 - torch's names
    """x limited to [min, max]; bounds may be numbers or tensors (then it is maximum/minimum).

    >>> import ndlite
    >>> ndlite.tensor([-2.0, 0.5, 3.0]).clamp(-1, 1).tolist()
    [-1.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x if min is None else maximum(x, min)
        return out if max is None else minimum(out, max)
    params = {}
    if min is not None:
        params["min"] = min
    if max is not None:
        params["max"] = max
    if x.dtype.kind != "f" and any(isinstance(v, float) for v in params.values()):
        x = x.to(as_dtype("float32"))
    return unary(Clamp, x, **params)


clip = clamp


# ---- casts and transfers ---------------------------------------------------------------------


@register
class AsType(Op):
    name = "astype"
    spec = Spec("unary", call="ndlite.testing.calls:astype_float64", tol=EXACT)
    save_inputs = False

    @staticmethod
    def forward(b, x, dtype):
        return b.astype(x, dtype)

    @staticmethod
    def backward(node, grad):
        # gradients flow between float dtypes only (an int result has no gradient)
        return astype(grad, node.params["source"])


def astype(x: Tensor, dtype) -> Tensor:
    """x converted to `dtype` (a new tensor; differentiable between float dtypes)."""
    dtype = as_dtype(dtype)
    if dtype is x.dtype:
        return x
    if dtype not in x._backend.dtypes:
        raise DTypeError(f"astype: backend {x._backend.name} does not support {dtype}")
    out = Tensor._make(x._backend.astype(x._data, dtype), x._backend)
    if x._rg and autograd.grad_enabled and dtype.kind == "f":
        autograd.record(AsType, (x,), out, {"dtype": dtype, "source": x.dtype})
    return out


@register
class Transfer(Op):
    name = "transfer"
    spec = Spec("unary", call="ndlite.testing.calls:transfer_roundtrip", tol=EXACT)

    @staticmethod
    def forward(b, x, target):
        return target.from_numpy(b.to_numpy(x))

    @staticmethod
    def backward(node, grad):
        return transfer(grad, node.params["source"])


def transfer(x: Tensor, target) -> Tensor:
    """x copied to another backend (differentiable: the gradient comes back)."""
    if x.dtype not in target.dtypes:
        raise DTypeError(f"to: backend {target.name} does not support {x.dtype}")
    host = x._backend.to_numpy(x._data)
    out = Tensor._make(target.from_numpy(host), target)
    if x._rg and autograd.grad_enabled:
        autograd.record(Transfer, (x,), out, {"target": target, "source": x._backend})
        out._node.backend = target
    return out


@register
class Clone(Op):
    name = "clone"
    spec = Spec("unary", tol=EXACT)

    @staticmethod
    def forward(b, x):
        return b.copy(x)

    @staticmethod
    def backward(node, grad):
        return grad


def clone(x: Tensor) -> Tensor:
    """A copy of x with its own memory (differentiable)."""
    return unary(Clone, x)
