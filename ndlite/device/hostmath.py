"""Math beyond the 30 required primitives, by name: the fallbacks of the optional primitives
`math(name, x)`, `math2(name, a, b)`, `argsort(x, axis, descending)` and
`cumulative(name, x, axis)` (protocol.py, FAST_PATHS). Each copies to the host, computes with
NumPy and copies back: correct on every backend, slow; NumPy and CuPy run the same NumPy names
on their own arrays (xp.py), OpenCL maps them to kernel expressions.

The names are the contract: every backend gives NumPy's results for them (transcendental ones
within the tolerance policy, rounding, classification and sorting ones bitwise).
"""

from __future__ import annotations

import math as _math

import numpy as np

#: math(name, x): ours -> NumPy's; a float x keeps its dtype, classifications give bool
UNARY = {
    "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan",
    "log1p": "log1p", "expm1": "expm1", "log2": "log2", "log10": "log10", "exp2": "exp2",
    "floor": "floor", "ceil": "ceil", "round": "rint", "trunc": "trunc", "erfc": "erfc",
    "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
}
#: the names of UNARY whose result is bool
CLASSIFY = ("isnan", "isinf", "isfinite")
#: math2(name, a, b): ours -> NumPy's (fmod, floor_divide and remainder of integers: x by 0
#: is 0, as NumPy gives)
BINARY = {"atan2": "arctan2", "fmod": "fmod", "floor_divide": "floor_divide",
          "remainder": "remainder"}
#: cumulative(name, x, axis)
SCANS = {"cumsum": "cumsum", "cumprod": "cumprod"}

_erfc = np.frompyfunc(_math.erfc, 1, 1)


def numpy_math(xp, name: str, x):
    """UNARY[name] of `x` through the array module `xp` (NumPy has no erfc: math.erfc)."""
    if name == "erfc" and xp is np:
        return np.asarray(_erfc(x), dtype=x.dtype)
    out = getattr(xp, UNARY[name])(x)
    return xp.asarray(out)


def numpy_math2(xp, name: str, a, b):
    dtype = a.dtype if hasattr(a, "dtype") else b.dtype
    a = a if hasattr(a, "dtype") else xp.asarray(a, dtype=dtype)
    b = b if hasattr(b, "dtype") else xp.asarray(b, dtype=dtype)
    with np.errstate(all="ignore"):
        return xp.asarray(getattr(xp, BINARY[name])(a, b)).astype(dtype, copy=False)


def numpy_argsort(xp, x, axis: int, descending: bool):
    """Stable: equal values keep their order (descending too, as PyTorch's stable sort)."""
    if descending:
        n = x.shape[axis]
        flipped = xp.flip(x, axis)
        index = xp.argsort(flipped, axis=axis, kind="stable")
        index = xp.flip(n - 1 - index, axis)
        return xp.array(index, order="C").astype(np.int64)
    return xp.argsort(x, axis=axis, kind="stable").astype(np.int64)


def _host(b, x):
    return b.to_numpy(x) if not isinstance(x, (int, float, bool)) else x


def unary(b, name: str, x):
    with np.errstate(all="ignore"):
        return b.from_numpy(np.array(numpy_math(np, name, b.to_numpy(x))))


def binary(b, name: str, x, y):
    return b.from_numpy(np.array(numpy_math2(np, name, _host(b, x), _host(b, y))))


def argsort(b, x, axis: int, descending: bool):
    return b.from_numpy(numpy_argsort(np, b.to_numpy(x), axis, descending))


def cumulative(b, name: str, x, axis: int):
    host = b.to_numpy(x)
    return b.from_numpy(np.array(getattr(np, SCANS[name])(host, axis=axis,
                                                                       dtype=host.dtype)))
