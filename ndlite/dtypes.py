"""Dtypes and the promotion rules between them.

ndlite dtypes are NumPy dtype objects (`ndlite.float32 is numpy.dtype("float32")`), so a buffer's
`.dtype` on any backend is directly an ndlite dtype. Promotion follows PyTorch's categories
(bool < integer < floating; a float beats any integer) and NumPy within a category
(float32 with float64 gives float64). Python scalars are weak: they take the tensor's dtype
when their kind fits, and an integer tensor meeting a Python float becomes float32.
"""

from __future__ import annotations

import builtins
from functools import cache

import numpy as np

from .errors import DTypeError

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

# PyTorch spellings
float = float32  # noqa: A001  (ndlite.float, like torch.float)
double = float64
int = int32  # noqa: A001
long = int64

SUPPORTED = (float32, float64, int32, int64, bool_)

default_float = float32
default_int = int64

_NAMES = {
    "float32": float32, "float": float32, "float64": float64, "double": float64,
    "int32": int32, "int": int32, "int64": int64, "long": int64, "bool": bool_,
}
_CATEGORY = {bool_: 0, int32: 1, int64: 1, float32: 2, float64: 2}


def as_dtype(dtype) -> np.dtype:
    """The ndlite dtype for a dtype, a name ("float32"), or a Python type (float → float32).

    >>> as_dtype("float32") is float32
    True
    """
    if dtype is None:
        return default_float
    if isinstance(dtype, np.dtype) and dtype in _CATEGORY:
        return dtype
    if dtype is builtins.float:
        return default_float
    if dtype is builtins.int:
        return default_int
    if dtype is builtins.bool:
        return bool_
    if isinstance(dtype, str) and dtype in _NAMES:
        return _NAMES[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is not None and dt in _CATEGORY:
        return dt
    raise DTypeError(
        f"dtype {dtype!r} is not supported; ndlite has float32, float64, int32, int64 and bool"
    )


@cache
def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype that `a op b` computes in: category first, then width.

    >>> promote(int64, float32) is float32
    True
    """
    ca, cb = _CATEGORY[a], _CATEGORY[b]
    if ca != cb:
        return a if ca > cb else b
    return a if a.itemsize >= b.itemsize else b


def promote_operands(a: np.dtype, a_shape: tuple, b: np.dtype, b_shape: tuple) -> np.dtype:
    """`promote` with PyTorch's rule for a 0-d tensor beside a dimensioned one: it does not
    widen a tensor of its category (float32 + 0-d float64 is float32), only lifts a lower
    category to its own dtype (int32 + 0-d float64 is float64).

    >>> promote_operands(float32, (3,), float64, ()) is float32
    True
    """
    if bool(a_shape) != bool(b_shape):
        zero, dims = (a, b) if not a_shape else (b, a)
        return dims if _CATEGORY[zero] <= _CATEGORY[dims] else zero
    return promote(a, b)


_pyfloat, _pyint, _pybool = builtins.float, builtins.int, builtins.bool


def scalar_dtype(tensor_dtype: np.dtype, value) -> np.dtype:
    """The dtype of `tensor op python_scalar`: the scalar is weak unless its kind is higher."""
    if isinstance(value, _pybool):
        return tensor_dtype
    if isinstance(value, _pyint):
        return int64 if tensor_dtype is bool_ else tensor_dtype
    if isinstance(value, _pyfloat):
        return tensor_dtype if tensor_dtype.kind == "f" else default_float
    raise DTypeError(f"cannot combine a tensor with a {type(value).__name__}")
