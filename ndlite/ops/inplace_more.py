"""More of PyTorch's in-place methods (`exp_`, `sigmoid_`, `lerp_`, `addcmul_`, ...), each the
out-of-place op written back through inplace.py's `_inplace`: the same checks (a leaf that
requires grad, a view), the same version counting, differentiable on a non-leaf."""

from __future__ import annotations

from ..tensor import Tensor
from . import composite as _c
from . import math as _m
from . import rounding as _r
from . import unary as _u
from .activation import erf
from .inplace import _inplace


def _unary_inplace(name: str, fn):
    def method(x: Tensor) -> Tensor:
        return _inplace(x, None, lambda a, _: fn(a), name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{name[:-1]}, written into the tensor itself."
    return method


#: name -> the in-place method, for the table of ndlite/methods.py
UNARY = {name + "_": _unary_inplace(name + "_", fn) for name, fn in (
    ("exp", _u.exp), ("log", _u.log), ("sqrt", _u.sqrt), ("sigmoid", _u.sigmoid),
    ("tanh", _u.tanh), ("abs", _u.abs), ("sign", _u.sign), ("erf", erf),
    ("reciprocal", _m.reciprocal), ("rsqrt", _m.rsqrt), ("square", _m.square),
    ("sin", _m.sin), ("cos", _m.cos), ("log1p", _m.log1p), ("expm1", _m.expm1),
    ("floor", _r.floor), ("ceil", _r.ceil), ("trunc", _r.trunc), ("round", _r.round))}


def lerp_(x: Tensor, end: Tensor, weight) -> Tensor:
    """x += weight * (end - x), in place (an exponential moving average's update)."""
    return _inplace(x, (end, weight), lambda a, _: _c.lerp(a, end, weight), "lerp_")


def addcmul_(x: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    return _inplace(x, (tensor1, tensor2),
                    lambda a, _: _c.addcmul(a, tensor1, tensor2, value=value), "addcmul_")


def addcdiv_(x: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    return _inplace(x, (tensor1, tensor2),
                    lambda a, _: _c.addcdiv(a, tensor1, tensor2, value=value), "addcdiv_")


def clamp_min_(x: Tensor, min) -> Tensor:  # noqa: A002 - PyTorch's name
    return _inplace(x, (min,), lambda a, _: _c.clamp_min(a, min), "clamp_min_")


def clamp_max_(x: Tensor, max) -> Tensor:  # noqa: A002 - PyTorch's name
    return _inplace(x, (max,), lambda a, _: _c.clamp_max(a, max), "clamp_max_")


def nan_to_num_(x: Tensor, nan: float = 0.0, posinf=None, neginf=None) -> Tensor:
    return _inplace(x, None, lambda a, _: _c.nan_to_num(a, nan, posinf, neginf), "nan_to_num_")
