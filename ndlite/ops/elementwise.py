"""Elementwise selection and copies: `where` (the gradient router of many backward formulas)
and `clone`. The math families live beside it: unary.py (exp, log, ...), binary.py
(arithmetic, comparisons, logic, clamp)."""

from __future__ import annotations

from ..creation import full_like
from ..dtypes import bool_, promote, scalar_dtype
from ..errors import DTypeError
from ..tensor import Tensor
from .cast import astype
from .dispatch import apply, as_scalar, broadcast_shapes, check_same_backend, unary, unbroadcast
from .registry import EXACT, Op, Spec, define, implements, register
from .samples import UNARY, WHERE


@register
class Where(Op):
    name = "where"
    spec = Spec(WHERE, tol=EXACT)
    save_inputs = (0,)  # the condition only

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


def _branches(condition: Tensor, x, y) -> list:
    """The two branches as tensors of one dtype on the condition's backend, or numbers."""
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
        branches[0] = full_like(condition, branches[0], dtype=scalar_dtype(bool_, branches[0]))
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
    return branches


@implements(Where)
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
    branches = _branches(condition, x, y)
    buffers = [v._data if isinstance(v, Tensor) else v for v in branches]
    backend = condition._backend
    return apply(Where, (condition, *branches), Where.forward(backend, condition._data, *buffers),
                 backend)


Clone = define("clone", lambda b, x: b.copy(x), lambda node, grad: grad,
               spec=Spec(UNARY, tol=EXACT))


@implements(Clone)
def clone(x: Tensor) -> Tensor:
    """A copy of x with its own memory (differentiable)."""
    return unary(Clone, x)
