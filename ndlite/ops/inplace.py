"""In-place ops: `add_`, `mul_`, `x += y`, `fill_`, `copy_`, `zero_`, `clamp_`, ...

The result is computed out of place first (so a bad operand raises before anything changes),
then written into the tensor's own memory, which its views share. Every write bumps the
tensor's version counter, so a backward pass that needs the old values raises instead of
using the new ones. On a non-leaf tensor in the graph the write is differentiable: the tensor
takes the node of the out-of-place result, computed from a copy of its old value. On a leaf
that requires grad it is an error, unless grad mode is off (as in optimizer steps).
"""

from __future__ import annotations

from .. import autograd
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor

_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2}


def check_inplace(x: Tensor, op: str) -> None:
    if autograd.grad_enabled and x._rg and x._node is None:
        raise RuntimeError(
            f"{op}: a leaf tensor that requires grad (shape {x.shape}) is being used in an "
            "in-place operation; do it under ndlite.no_grad() (as optimizers do), or on a clone")


def commit(x: Tensor, out: Tensor) -> Tensor:
    """Write `out` (x's shape) into x's memory; x joins the graph through out's node."""
    x._backend.assign(x._data, out._data)
    x._bump()
    if out._node is not None:
        x._node, x._rg = out._node, True
    return x


def _inplace(x: Tensor, other, fn, op: str) -> Tensor:
    check_inplace(x, op)
    graph = autograd.grad_enabled and (x._rg or (isinstance(other, Tensor) and other._rg))
    if graph:
        # backward may need x's old value: compute from a copy, then overwrite x
        old = Tensor._make(x._backend.copy(x._data), x._backend, x._node, x._rg)
        out = fn(old, other)
    else:
        with autograd.no_grad():
            out = fn(x, other)
    if out.shape != x.shape:
        raise ShapeError(f"{op}: the result of shape {out.shape} cannot be written into a "
                         f"tensor of shape {x.shape}")
    if _CATEGORY[out.dtype.kind] > _CATEGORY[x.dtype.kind]:
        raise DTypeError(f"{op}: the result type {out.dtype} cannot be cast to the tensor's "
                         f"dtype {x.dtype}")
    if graph and out.dtype != x.dtype:
        out = out.to(x.dtype)
    return commit(x, out)


def add_(x: Tensor, other, alpha=1) -> Tensor:
    """x += alpha * other, in place."""
    if alpha != 1:
        return _inplace(x, other, lambda a, b: elementwise.add(a, b * alpha), "add_")
    return _inplace(x, other, elementwise.add, "add_")


def sub_(x: Tensor, other, alpha=1) -> Tensor:
    """x -= alpha * other, in place."""
    if alpha != 1:
        return _inplace(x, other, lambda a, b: elementwise.sub(a, b * alpha), "sub_")
    return _inplace(x, other, elementwise.sub, "sub_")


def mul_(x: Tensor, other) -> Tensor:
    return _inplace(x, other, elementwise.mul, "mul_")


def div_(x: Tensor, other) -> Tensor:
    return _inplace(x, other, elementwise.div, "div_")


def pow_(x: Tensor, other) -> Tensor:
    return _inplace(x, other, elementwise.pow, "pow_")


def clamp_(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    return _inplace(x, None, lambda a, _: elementwise.clamp(a, min, max), "clamp_")


def neg_(x: Tensor) -> Tensor:
    return _inplace(x, None, lambda a, _: elementwise.neg(a), "neg_")


def relu_(x: Tensor) -> Tensor:
    return _inplace(x, None, lambda a, _: elementwise.relu(a), "relu_")


def fill_(x: Tensor, value) -> Tensor:
    """Every element set to `value` (a number or a one-element tensor)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError(f"fill_: value must have one element, got shape {value.shape}")
        value = value.reshape(())
    indexing.setitem(x, Ellipsis, value)
    return x


def copy_(x: Tensor, src) -> Tensor:
    """x's values replaced by `src` (broadcast, cast, and moved from another backend)."""
    if isinstance(src, Tensor) and src._backend is not x._backend:
        src = src.to(x._backend)
    indexing.setitem(x, Ellipsis, src)
    return x


from . import elementwise, indexing  # noqa: E402  (both build on this module)
