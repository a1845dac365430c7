"""In-place ops: `add_`, `mul_`, `x += y`, `clamp_`, ... (`fill_`, `copy_` and `x[key] = v`
are in indexing.py, built on the same `check_inplace` and `commit`).

The result is computed out of place first (so a bad operand raises before anything changes),
then written into the tensor's own memory, which its views share. Every write bumps the
tensor's version counter, so a backward pass that needs the old values raises instead of
using the new ones. On a non-leaf tensor in the graph the write is differentiable: the tensor
takes the node of the out-of-place result, computed from a copy of its old value. On a leaf
that requires grad it is an error, unless grad mode is off (as in optimizer steps). A write
through a view rewrites the history of the view's base and of its other views (views.py).
"""

from __future__ import annotations

from .. import graph
from ..dtypes import category
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .binary import add, clamp, div, mul, pow, sub
from .unary import neg, relu
from .views import after_write, check_view_write


def check_inplace(x: Tensor, op: str) -> None:
    if graph.mode.enabled and x._rg and x._node is None:
        raise RuntimeError(
            f"{op}: a leaf tensor that requires grad (shape {x.shape}) is being used in an "
            "in-place operation; do it under ndlite.no_grad() (as optimizers do), or on a clone")
    check_view_write(x, op)


def commit(x: Tensor, out: Tensor) -> Tensor:
    """Write `out` (x's shape) into x's memory; x joins the graph through out's node, and so
    do x's base and their views (ops/views.py)."""
    x._backend.assign(x._data, out._data)
    x._bump()
    if out._node is not None:
        after_write(x, out)
    return x


def _inplace(x: Tensor, other, fn, op: str) -> Tensor:
    check_inplace(x, op)
    operands = other if isinstance(other, tuple) else (other,)  # (a tuple: several operands)
    recording = graph.mode.enabled and (x._rg or any(isinstance(o, Tensor) and o._rg
                                                     for o in operands))
    if recording:
        # backward may need x's old value: compute from a copy, then overwrite x
        old = Tensor._make(x._backend.copy(x._data), x._backend, x._node, x._rg)
        out = fn(old, other)
    else:
        with graph.no_grad():
            out = fn(x, other)
    if out.shape != x.shape:
        raise ShapeError(f"{op}: the result of shape {out.shape} cannot be written into a "
                         f"tensor of shape {x.shape}")
    if category(out.dtype) > category(x.dtype):
        raise DTypeError(f"{op}: the result type {out.dtype} cannot be cast to the tensor's "
                         f"dtype {x.dtype}")
    if recording and out.dtype != x.dtype:
        out = out.to(x.dtype)
    return commit(x, out)


def add_(x: Tensor, other, alpha=1) -> Tensor:
    """x += alpha * other, in place."""
    if alpha != 1:
        return _inplace(x, other, lambda a, b: add(a, b * alpha), "add_")
    return _inplace(x, other, add, "add_")


def sub_(x: Tensor, other, alpha=1) -> Tensor:
    """x -= alpha * other, in place."""
    if alpha != 1:
        return _inplace(x, other, lambda a, b: sub(a, b * alpha), "sub_")
    return _inplace(x, other, sub, "sub_")


def mul_(x: Tensor, other) -> Tensor:
    return _inplace(x, other, mul, "mul_")


def div_(x: Tensor, other) -> Tensor:
    return _inplace(x, other, div, "div_")


def pow_(x: Tensor, other) -> Tensor:
    return _inplace(x, other, pow, "pow_")


def clamp_(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    return _inplace(x, (min, max), lambda a, _: clamp(a, min, max), "clamp_")


def neg_(x: Tensor) -> Tensor:
    return _inplace(x, None, lambda a, _: neg(a), "neg_")


def relu_(x: Tensor) -> Tensor:
    return _inplace(x, None, lambda a, _: relu(a), "relu_")
