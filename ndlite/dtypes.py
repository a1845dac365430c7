"""Dtypes and the promotion rules between them.

ndlite dtypes are NumPy dtype objects (`ndlite.float32 is numpy.dtype("float32")`), so a buffer's
`.dtype` on any backend is directly an ndlite dtype. Promotion follows PyTorch's categories
(bool < integer < floating; a float beats any integer) and NumPy within a category
(float32 with float64 gives float64). Python scalars are weak: they take the tensor's dtype
when their kind fits, and an integer tensor meeting a Python float becomes float32.

Half precision: float16 is NumPy's; bfloat16 is the `ml_dtypes` package's (an optional extra,
`pip install 'ndlite[half]'`, which needs NumPy >= 2). As in PyTorch, float16 with bfloat16
gives float32. NumPy gives bfloat16 the kind "V", so ask `is_floating(dtype)`, never
`dtype.kind == "f"`.
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
float16 = np.dtype("float16")

try:
    import ml_dtypes
except ImportError:  # bfloat16 is an optional extra
    ml_dtypes = None

_BFLOAT16_MISSING = ("bfloat16 needs the ml_dtypes package (which needs NumPy >= 2): "
                     "pip install 'ndlite[half]' or pip install ml_dtypes")


class _MissingDType:
    """What `ndlite.bfloat16` is without ml_dtypes: using it raises an error naming the package."""

    name = "bfloat16"

    def __repr__(self) -> str:
        return "ndlite.bfloat16 (unavailable: ml_dtypes is not installed)"


bfloat16 = np.dtype(ml_dtypes.bfloat16) if ml_dtypes is not None else _MissingDType()

# PyTorch spellings
float = float32  # noqa: A001  (ndlite.float, like torch.float)
double = float64
half = float16
int = int32  # noqa: A001
long = int64

#: the half-precision floats this install has (bfloat16 only with ml_dtypes)
HALF = (float16, bfloat16) if ml_dtypes is not None else (float16,)
FLOATING = (*HALF, float32, float64)
SUPPORTED = (float32, float64, int32, int64, bool_, *HALF)

default_float = float32
default_int = int64

_NAMES = {
    "float32": float32, "float": float32, "float64": float64, "double": float64,
    "int32": int32, "int": int32, "int64": int64, "long": int64, "bool": bool_,
    "float16": float16, "half": float16, "bfloat16": bfloat16,
}
_CATEGORY = {bool_: 0, int32: 1, int64: 1, **dict.fromkeys(FLOATING, 2)}


def is_floating(dtype) -> bool:
    """Whether `dtype` is one of ndlite's floats (bfloat16's NumPy kind is "V", not "f").

    >>> is_floating(float16), is_floating(int64)
    (True, False)
    """
    return _CATEGORY.get(dtype) == 2


def category(dtype) -> int:
    """0 for bool, 1 for the integers, 2 for the floats: promotion goes up this order."""
    return _CATEGORY[dtype]


def finfo(dtype):
    """Machine limits (eps, tiny, max) of a float dtype, bfloat16 included.

    >>> bool(finfo(float16).eps == 2.0 ** -10)
    True
    """
    if ml_dtypes is not None and dtype == bfloat16:
        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def as_dtype(dtype) -> np.dtype:
    """The ndlite dtype for a dtype, a name ("float32"), or a Python type (float → float32).

    >>> as_dtype("float32") is float32
    True
    """
    if dtype is None:
        return default_float
    if isinstance(dtype, _MissingDType) or (
            isinstance(dtype, str) and dtype == "bfloat16" and ml_dtypes is None):
        raise DTypeError(_BFLOAT16_MISSING)
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
        f"dtype {dtype!r} is not supported; ndlite has float16, bfloat16, float32, float64, "
        "int32, int64 and bool"
    )


@cache
def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype that `a op b` computes in: category first, then width; float16 with
    bfloat16 is float32 (PyTorch's rule: neither holds the other).

    >>> promote(int64, float32) is float32
    True
    >>> promote(float16, float32) is float32
    True
    """
    ca, cb = _CATEGORY[a], _CATEGORY[b]
    if ca != cb:
        return a if ca > cb else b
    if a != b and a.itemsize == b.itemsize == 2 and ca == 2:
        return float32
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
        return tensor_dtype if is_floating(tensor_dtype) else default_float
    raise DTypeError(f"cannot combine a tensor with a {type(value).__name__}")
