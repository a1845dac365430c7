"""The math-by-name primitives of the contract (`math`, `math2`; ndlite.device.hostmath has the
names) as expressions of the one elementwise `map` kernel: each name is an OP_* macro passed
with the kernel's other #defines, chosen per input kind (OpenCL's built-in functions for
floats; NumPy's integer conventions written out, where x by 0 is 0)."""

from __future__ import annotations

import numpy as np

from ndlite.device import DTypeError

from .kernels import arith

#: math(name, x) on floats: OpenCL built-ins with NumPy's meaning (rint rounds half to even)
FLOAT_UNARY = {
    "sin": "sin(a)", "cos": "cos(a)", "tan": "tan(a)", "sinh": "sinh(a)", "cosh": "cosh(a)",
    "asin": "asin(a)", "acos": "acos(a)", "atan": "atan(a)", "log1p": "log1p(a)",
    "expm1": "expm1(a)", "log2": "log2(a)", "log10": "log10(a)", "exp2": "exp2(a)",
    "floor": "floor(a)", "ceil": "ceil(a)", "round": "rint(a)", "trunc": "trunc(a)",
    "erfc": "erfc(a)", "isnan": "isnan(a)", "isinf": "isinf(a)", "isfinite": "isfinite(a)",
}
#: classifications of integers and bools: constants
INT_UNARY = {"isnan": "0", "isinf": "0", "isfinite": "1", "floor": "(a)", "ceil": "(a)",
             "round": "(a)", "trunc": "(a)"}
FLOAT_BINARY = {"atan2": "atan2(a, b)", "fmod": "fmod(a, b)"}
_MOD = "((a) % (b))"
INT_BINARY = {
    "fmod": f"((b) == 0 ? 0 : {_MOD})",
    "floor_divide": "((b) == 0 ? 0 : (a) / (b) - ((((a) % (b)) != 0) && (((a) < 0) != ((b) < 0))))",
    "remainder": f"((b) == 0 ? 0 : ({_MOD} != 0 && (({_MOD} < 0) != ((b) < 0))) ? {_MOD} + (b)"
                 f" : {_MOD})",
}
_BOOL = np.dtype(bool)


def macro(op: str, dtype: np.dtype) -> tuple | None:
    """The (#define name, body) of `op` ("M2_FMOD") for inputs of `dtype`, or None if `op`
    is not one of these."""
    if op.startswith("M1_"):
        table, params = (FLOAT_UNARY if arith(dtype).kind == "f" else INT_UNARY), "(a)"
    elif op.startswith("M2_"):
        table, params = (FLOAT_BINARY if arith(dtype).kind == "f" else INT_BINARY), "(a, b)"
    else:
        return None
    return f"OP_{op}{params}", table[op[3:].lower()]


def unary_op(name: str, dtype: np.dtype) -> tuple[str, np.dtype]:
    """The elementwise op of math(name, x) and its result dtype."""
    if name not in (FLOAT_UNARY if arith(dtype).kind == "f" else INT_UNARY):
        raise DTypeError(f"{name}: not defined for {dtype} (opencl)")
    classify = name in ("isnan", "isinf", "isfinite")
    return f"M1_{name.upper()}", _BOOL if classify else dtype


def binary_op(name: str, dtype: np.dtype) -> str:
    """The elementwise op of math2(name, a, b) on operands of `dtype`."""
    if name not in (FLOAT_BINARY if arith(dtype).kind == "f" else INT_BINARY):
        raise DTypeError(f"{name}: not defined for {dtype} (opencl)")
    return f"M2_{name.upper()}"
