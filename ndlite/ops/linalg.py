"""Matrix products: matmul (1-D, 2-D, batched with broadcast batch dims), mm, bmm, dot, and
linear (x @ weight.T + bias as one op: one node instead of three on the hot path of every
fully connected layer)."""

from __future__ import annotations

from ..amp_state import switch as amp
from ..dtypes import is_floating, promote
from ..errors import DTypeError, ShapeError
from ..graph import mode, record
from ..tensor import Tensor
from . import samples
from .autocast import autocast_inputs
from .dispatch import broadcast_shapes, cast, check_same_backend, nary, unbroadcast
from .registry import ROUNDS_ONCE, SCALED, Op, Spec, declare, implements, register

_make = Tensor._make


def _mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


def _as_matrices(x_shape: tuple, y_shape: tuple) -> tuple:
    """The shapes matmul works in: a 1-D x is a row (1, k), a 1-D y a column (k, 1)."""
    x2 = x_shape if len(x_shape) > 1 else (1,) + x_shape
    y2 = y_shape if len(y_shape) > 1 else y_shape + (1,)
    return x2, y2


def _result_shape(x_shape: tuple, y_shape: tuple) -> tuple:
    x2, y2 = _as_matrices(x_shape, y_shape)
    batch = broadcast_shapes(x2[:-2], y2[:-2], "matmul")
    rows = (x2[-2],) if len(x_shape) > 1 else ()
    cols = (y2[-1],) if len(y_shape) > 1 else ()
    return batch + rows + cols, batch + (x2[-2], y2[-1])


@register
class Matmul(Op):
    name = "matmul"
    spec = Spec(samples.MATMUL, tol=SCALED, second_order=True, half_tol=ROUNDS_ONCE)
    save_inputs = True

    @staticmethod
    def forward(b, x, y):
        if len(x.shape) > 1 and len(y.shape) > 1:
            return b.matmul(x, y)
        # vectors: as a row / a column, then the added dims dropped again
        x2, y2 = _as_matrices(x.shape, y.shape)
        out = b.matmul(b.reshape(x, x2), b.reshape(y, y2))
        return b.reshape(out, _result_shape(x.shape, y.shape)[0])

    @staticmethod
    def backward(node, grad):
        x, y = node.saved
        x_shape, y_shape = node.shapes
        if len(x_shape) > 1 and len(y_shape) > 1:
            gx = unbroadcast(grad @ _mT(y), x_shape) if node.next[0] is not None else None
            gy = unbroadcast(_mT(x) @ grad, y_shape) if node.next[1] is not None else None
            return gx, gy
        x2_shape, y2_shape = _as_matrices(x_shape, y_shape)
        x2, y2 = x.reshape(x2_shape), y.reshape(y2_shape)
        g = grad.reshape(_result_shape(x_shape, y_shape)[1])
        gx = gy = None
        if node.next[0] is not None:
            gx = unbroadcast(g @ _mT(y2), x2_shape).reshape(x_shape)
        if node.next[1] is not None:
            gy = unbroadcast(_mT(x2) @ g, y2_shape).reshape(y_shape)
        return gx, gy


def _operands(a, b, op: str):
    if a.__class__ is not Tensor or b.__class__ is not Tensor:
        if not isinstance(a, Tensor) or not isinstance(b, Tensor):
            raise TypeError(f"{op}: both operands must be tensors")
    da, db = a._data.dtype, b._data.dtype
    if da is db and is_floating(da):
        return a, b
    if da.kind == "b" or db.kind == "b":
        raise DTypeError(f"{op}: bool tensors are not supported (shapes {a.shape} and {b.shape})")
    if da != db:
        dtype = promote(da, db)
        a, b = cast(a, dtype), cast(b, dtype)
    return a, b


@implements(Matmul)
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """The matrix product with NumPy's rules: 1-D operands are vectors, more than 2 dims are
    batches of matrices whose batch dims broadcast.

    >>> import ndlite
    >>> (ndlite.ones(5, 2, 3) @ ndlite.ones(3, 4)).shape
    (5, 2, 4)
    """
    if amp.on:
        a, b = autocast_inputs(Matmul, (a, b))
    a, b = _operands(a, b, "matmul")
    sa, sb = a._data.shape, b._data.shape
    if not sa or not sb:
        raise ShapeError(f"matmul: both operands need at least 1 dim, got shapes {sa} and {sb}")
    k_b = sb[-2] if len(sb) > 1 else sb[0]
    if sa[-1] != k_b:
        raise ShapeError(f"matmul: shapes {sa} and {sb} are not aligned: {sa[-1]} != {k_b}")
    if len(sa) > 2 or len(sb) > 2:
        _result_shape(sa, sb)  # checks that the batch dims broadcast
    backend = a._backend
    if backend is not b._backend:
        check_same_backend("matmul", a, b)
    out = _make(Matmul.forward(backend, a._data, b._data), backend)
    if (a._rg or b._rg) and mode.enabled:  # inline: the hot path of every layer
        record(Matmul, (a, b), out)
    return out


def rmatmul(a, b) -> Tensor:
    return matmul(b, a)


def mm(a: Tensor, b: Tensor) -> Tensor:
    """The product of two matrices (2-D only)."""
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(f"mm: both operands must be 2-D, got shapes {a.shape} and {b.shape}")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched product of two 3-D tensors with one batch size."""
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: expected two 3-D tensors with one batch size, got shapes "
                         f"{a.shape} and {b.shape}")
    return matmul(a, b)


def dot(a: Tensor, b: Tensor) -> Tensor:
    """The inner product of two vectors."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"dot: both operands must be 1-D, got shapes {a.shape} and {b.shape}")
    return matmul(a, b)


@register
class Linear(Op):
    name = "linear"
    spec = Spec(samples.LINEAR, tol=SCALED, second_order=True)
    save_inputs = True

    @staticmethod
    def forward(b, x, weight, bias=None):
        if bias is None:
            return b.matmul(x, b.permute(weight, (1, 0)))
        return b.linear(x, weight, bias)  # matmul + add, or one fused call (protocol.py)

    @staticmethod
    def backward(node, grad):
        x, weight = node.saved[0], node.saved[1]
        if not mode.enabled and _plain(grad, x, weight):
            return _linear_grads(node, grad._data, x._data, weight._data, grad._backend)
        grads = [None] * len(node.next)
        if node.next[0] is not None:
            grads[0] = grad @ weight
        if node.next[1] is not None:
            in_features = weight.shape[1]
            grads[1] = grad.reshape(-1, weight.shape[0]).T @ x.reshape(-1, in_features)
        if len(node.next) > 2 and node.next[2] is not None:
            grads[2] = unbroadcast(grad, node.shapes[2])
        return tuple(grads)


def _plain(grad, x, weight) -> bool:
    """Whether linear's first-order gradients can run on the buffers: one backend, one dtype."""
    b, dtype = grad._backend, grad._data.dtype
    return (x._backend is b and weight._backend is b and x._data.dtype is dtype
            and weight._data.dtype is dtype)


def _linear_grads(node, g, x, w, b) -> tuple:
    """linear's first-order gradients from the buffers in one backend call (linear_grad,
    protocol.py: its fallback makes the calls of the composed backward), without a tensor and
    a dispatch for each step (the backward of a Linear layer took 60 us that way on a CPU,
    twice PyTorch's whole step of a small MLP's)."""
    nxt = node.next
    needs = (nxt[0] is not None, nxt[1] is not None, len(nxt) > 2 and nxt[2] is not None)
    grads = b.linear_grad(g, x, w, needs)
    return tuple(None if grads[i] is None else Tensor._make(grads[i], b)
                 for i in range(len(nxt)))


@implements(Linear)
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias, for x of shape (..., in_features) and weight (out, in).

    >>> import ndlite
    >>> ndlite.nn.functional.linear(ndlite.ones(4, 3), ndlite.ones(2, 3)).tolist()[0]
    [3.0, 3.0]
    """
    if amp.on:
        x, weight, bias = autocast_inputs(Linear, (x, weight, bias))
    tensors = [x, weight] if bias is None else [x, weight, bias]
    xs, ws = x._data.shape, weight._data.shape
    if len(ws) != 2:
        raise ShapeError(f"linear: weight must be 2-D (out_features, in_features), got "
                         f"{weight.shape}")
    if not xs or xs[-1] != ws[1]:
        raise ShapeError(f"linear: input of shape {x.shape} does not fit weight of shape "
                         f"{weight.shape}: {x.shape[-1] if x.ndim else 'no'} != {weight.shape[1]}")
    if bias is not None and bias._data.shape != (ws[0],):
        raise ShapeError(f"linear: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    dtype = x._data.dtype
    if not is_floating(dtype) or weight._data.dtype != dtype or \
            (bias is not None and bias._data.dtype != dtype):
        raise DTypeError(f"linear: input, weight and bias must share one floating dtype, "
                         f"got {[str(t.dtype) for t in tensors]}")
    if len(xs) == 1:
        return linear(x.unsqueeze(0), weight, bias).squeeze(0)
    return nary(Linear, tensors)


_CONTRACTION = {"tol": SCALED, "half_tol": ROUNDS_ONCE}
declare("mm", Spec(samples.MATMUL, params={"ndim": (2, 2)}, **_CONTRACTION), mm)
declare("bmm", Spec(samples.MATMUL, params={"ndim": (3, 3), "same_batch": True}, **_CONTRACTION),
        bmm)
declare("dot", Spec(samples.MATMUL, params={"ndim": (1, 1)}, **_CONTRACTION), dot)
