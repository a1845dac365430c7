"""Applying an op: operand checks, dtype promotion, then forward and graph recording.

This is the one apply path of every op: `unary`, `binary` and `nary` check and promote
operands, call the op's forward and end in `apply`, which wraps the result buffer and records
the node (ndlite.graph.attach); ops with their own argument handling (conv, pooling, losses)
call `apply` directly. It is the hot path of every tensor operation, so it is written flat: a
fast path for same-shape same-dtype operands, and slow checks (broadcast shapes, promotion)
only when they can matter. Errors are raised before anything is computed, so a failed op
changes nothing.
"""

from __future__ import annotations

import numbers
from functools import lru_cache

import numpy as np

from ..amp_state import switch as amp
from ..creation import tensor
from ..dtypes import (
    FLOATING,
    bool_,
    default_float,
    is_floating,
    promote_operands,
    scalar_dtype,
)
from ..errors import DeviceMismatchError, DTypeError, ShapeError
from ..graph import attach, mode, record
from ..tensor import Tensor
from .autocast import autocast_inputs
from .cast import astype

_make = Tensor._make
_SCALARS = (int, float, bool)
_FLOATS = frozenset(FLOATING)  # what the "float" rule leaves as it is


@lru_cache(maxsize=4096)
def broadcast_shapes(a: tuple, b: tuple, op: str = "op") -> tuple:
    """The NumPy broadcast of two shapes, or a ShapeError naming the op and both shapes."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(
                f"{op}: shapes {a} and {b} cannot be broadcast together "
                f"(dim {i - n}: {x} vs {y})"
            )
    return tuple(out)


def as_scalar(value, op: str):
    """A Python number from `value`, or None if it is not a scalar."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, np.generic) and not isinstance(value, np.complexfloating):
        return value.item()
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def as_tensor_like(value, like: Tensor, op: str) -> Tensor:
    """`value` (a list, an array) as a tensor on `like`'s backend."""
    try:
        return tensor(value, backend=like._backend)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{op}: cannot use a {type(value).__name__} as an operand: {exc}") from None


def check_same_backend(op: str, *tensors: Tensor) -> None:
    first = tensors[0]._backend
    for t in tensors[1:]:
        if t._backend is not first:
            raise DeviceMismatchError(
                f"{op}: tensors are on different backends: {first.name} {tensors[0].shape} and "
                f"{t._backend.name} {t.shape}; move one with .to({first.name!r})"
            )


def cast(t: Tensor, dtype) -> Tensor:
    """`t` as `dtype` (differentiable between float dtypes)."""
    return astype(t, dtype)


def _dtype_rule(op, dtype, opname):
    """The dtype `op` computes in, given its inputs' promoted dtype."""
    rule = op.dtype_rule
    if rule is None:
        return dtype
    if rule == "float":
        return dtype if is_floating(dtype) else default_float
    if rule == "no_bool" and dtype is bool_:
        raise DTypeError(f"{opname} is not supported on bool tensors; use logical ops "
                         f"(~, &, |, ^) or cast with .long() / .float()")
    if rule == "integral" and is_floating(dtype):
        raise DTypeError(f"{opname} needs bool or integer tensors, got {dtype}")
    return dtype


def unary(op, x: Tensor, **params) -> Tensor:
    """Apply a one-input op."""
    if amp.on:
        x = autocast_inputs(op, (x,))[0]
    dtype = x._data.dtype
    rule = op.dtype_rule
    if rule is not None and not (rule == "no_bool" and dtype is not bool_ or
                                 rule == "float" and dtype in _FLOATS):
        want = _dtype_rule(op, dtype, op.name)
        if want is not dtype:
            x = cast(x, want)
    backend = x._backend
    out = _make(op.forward(backend, x._data, **params), backend)
    if x._rg and mode.enabled and op.differentiable:
        record(op, (x,), out, params or None)
    return out


def binary(op, a, b) -> Tensor:
    """Apply a two-input op; either input may be a Python scalar (not both)."""
    if amp.on:
        a, b = autocast_inputs(op, (a, b))
    if type(a) is Tensor and type(b) is Tensor:
        da, db = a._data, b._data
        if a._backend is not b._backend:
            check_same_backend(op.name, a, b)
        if da.dtype is not db.dtype or op.dtype_rule is not None:
            dtype = _dtype_rule(op, promote_operands(da.dtype, da.shape, db.dtype, db.shape),
                                op.name)
            if da.dtype is not dtype:
                a = cast(a, dtype)
                da = a._data
            if db.dtype is not dtype:
                b = cast(b, dtype)
                db = b._data
        if da.shape != db.shape:
            broadcast_shapes(da.shape, db.shape, op.name)
        backend = a._backend
        out = _make(op.forward(backend, da, db), backend)
        if (a._rg or b._rg) and mode.enabled and op.differentiable:
            record(op, (a, b), out)
        return out
    if a.__class__ is Tensor:
        t, s, t_first = a, b, True
    elif b.__class__ is Tensor:
        t, s, t_first = b, a, False
    else:
        raise TypeError(f"{op.name}: needs at least one tensor operand")
    dtype = t._data.dtype
    if s.__class__ is float and is_floating(dtype) and op.dtype_rule != "integral":
        value = s  # the common case: a float scalar with a float tensor
    else:
        value = as_scalar(s, op.name)
        if value is None:
            other = as_tensor_like(s, t, op.name)
            return binary(op, t, other) if t_first else binary(op, other, t)
        want = _dtype_rule(op, scalar_dtype(dtype, value), op.name)
        if want is not dtype:
            t = cast(t, want)
    backend = t._backend
    if t_first:
        out = _make(op.forward(backend, t._data, value), backend)
    else:
        out = _make(op.forward(backend, value, t._data), backend)
    if t._rg and mode.enabled and op.differentiable:
        record(op, (t, value) if t_first else (value, t), out)
    return out


def nary(op, tensors, **params) -> Tensor:
    """Apply an op over a list of tensors that need no promotion (cat, stack, matmul, ...)."""
    if amp.on:
        tensors = autocast_inputs(op, tuple(tensors))
    backend = tensors[0]._backend
    buffers, grads = [], False
    for t in tensors:
        if t._backend is not backend:
            check_same_backend(op.name, *tensors)
        buffers.append(t._data)
        grads = grads or t._rg
    out = _make(op.forward(backend, *buffers, **params), backend)
    if grads and mode.enabled and op.differentiable:
        record(op, tuple(tensors), out, params or None)
    return out


@lru_cache(maxsize=4096)
def _unbroadcast_plan(grad_shape: tuple, shape: tuple) -> tuple:
    lead = len(grad_shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad_shape[lead + i] != 1
    )
    return axes


def unbroadcast(grad: Tensor, shape: tuple) -> Tensor:
    """Sum `grad` down to `shape`: the gradient of broadcasting an input of that shape."""
    if grad.shape == shape:
        return grad
    axes = _unbroadcast_plan(grad.shape, shape)
    return grad.sum(dim=axes).reshape(shape)


def apply(op, inputs, buffer, backend, params=None) -> Tensor:
    """The result `buffer` of `op` on `inputs` as a tensor, recorded in the graph when an
    input requires grad (the last step of every op)."""
    return attach(op, inputs, _make(buffer, backend), params)
