"""float16 and bfloat16 on the CuPy backend: stored in half, computed in float32.

The raw kernels (kernels/*.cu) are written for float and double, so every kernel primitive,
reduction and fast path is wrapped once by ndlite.device.halfmath: a half call runs on float32
copies and its result is rounded once (PyTorch's rule). Matrix products are the exception:
cupy.matmul of 2-D halves calls cublasGemmEx with CUBLAS_COMPUTE_32F (float32 accumulation,
tensor cores), which is what is wanted; a vector product, which CuPy sums in a half reduction
kernel, goes through float32. Convolutions are the other exception while cuDNN is on: cuDNN
runs them in half with float32 accumulation (cudnn.py), nn.py takes float32 copies itself for
what cuDNN declines. And + - * / of two halves of one dtype run as CuPy's own half ufuncs:
one operation computed wider and rounded once is the correctly rounded half result, the same
bits as the float32 route, without its three extra passes (the bfloat16 GPT step spent 23 of
its 61 ms in them). Imports no CuPy (the backend passes its module in).
"""

from __future__ import annotations

import re

import numpy as np

from ndlite.device import Backend
from ndlite.device.halfmath import CONTRACTIONS, IN_PLACE, SELECTIONS, compute_in_float32
from ndlite.dtypes import HALF

#: the arithmetic CuPy's ufuncs do in a half dtype with one rounding: ndlite name -> ufunc
NATIVE_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide"}
_F16, _BF16 = HALF[0], HALF[-1]

#: CuPy's own ufuncs and reductions that run on float32 copies of halves as well: its bfloat16
#: support is new (CuPy 14: it sorts no bfloat16), and the signed zeros of max/min must stay
#: the contract's
BY_FLOAT32 = ("exp", "log", "sqrt", "tanh", "neg", "abs", "sign", "argsort") + SELECTIONS


def halves(cupy) -> tuple:
    """float16; bfloat16 too from CuPy 14 (the first to take ml_dtypes' bfloat16 arrays)."""
    major = int(re.match(r"\d+", cupy.__version__).group())
    return tuple(d for d in HALF if d == np.float16 or major >= 14)


def install(backend, cupy, kernel_primitives: tuple, native: tuple = ()) -> None:
    """Wrap the backend's half paths and list the halves in its dtypes. `native` names the
    methods that take halves themselves (the convolutions while cuDNN is on: cudnn.py)."""
    names = tuple(n for n in CONTRACTIONS if n != "matmul") + IN_PLACE + kernel_primitives
    compute_in_float32(backend, tuple(n for n in names + BY_FLOAT32 if n not in native))
    for name, ufunc in NATIVE_BINARY.items():
        setattr(backend, name, native_binary(getattr(cupy, ufunc), getattr(backend, name)))
    backend.dtypes = Backend.dtypes | frozenset(halves(cupy))


def native_binary(ufunc, other):
    """`ufunc(a, b)` when a and b are arrays of one half dtype, else `other(a, b)` (a Python
    number with a half goes by float32, unrounded, as PyTorch computes it)."""

    def call(a, b):
        dtype = getattr(a, "dtype", None)
        if (dtype is _F16 or dtype is _BF16) and getattr(b, "dtype", None) is dtype:
            return ufunc(a, b)
        return other(a, b)

    call.__name__ = call.__qualname__ = getattr(other, "__name__", "binary")
    call.__wrapped__ = other
    return call


def vector_matmul(backend, a, b):
    """A product with a 1-D operand in float32, rounded once."""
    return backend.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
