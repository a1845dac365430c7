"""x @ weight^T + bias in one cuBLASLt call: the bias added in the product's epilogue.

A Linear layer's forward was a cuBLAS product and then a separate add that read the product
back and wrote it again: a pass over the output for nothing (the character GPT's step spent
about 0.9 ms of an H100's ~39 ms of GPU time in those adds). cuBLASLt's epilogue
CUBLASLT_EPILOGUE_BIAS adds the bias to each accumulator before the one rounding to the
output. So the result is not the bits of matmul-then-add (two roundings), but within the
contraction tolerance of the policy; float32 computes in CUBLAS_COMPUTE_32F as every ndlite
product does (no TF32). cuBLASLt's library is the one CuPy's cuBLAS loaded beside it
(/proc/self/maps, as blas.py finds libcublas), reached through ctypes.

Per (dtype, N, K, O) key the descriptors, layouts and the heuristic's algorithm are made once;
per call only the bias pointer is set. The algorithm is cuBLASLt's first heuristic pick (no
timing), so the same key runs the same kernels: bitwise equal run to run. Calls it cannot
take (another dtype, no bias, operands not contiguous or not 256-byte aligned, an empty
shape, no cuBLASLt) return None: the caller runs the product and the add.
"""

from __future__ import annotations

import ctypes
from functools import cache

import cupy
import numpy as np

from .blas import loaded

# cuBLASLt enum values (library ABI, stable across CUDA 11-13)
CUDA_R_32F, CUDA_R_64F = 0, 1
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F = 68, 70
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_POINTER = 3, 4, 7, 8
EPILOGUE_BIAS = 4
PREF_MAX_WORKSPACE_BYTES = 1
#: the most workspace a product may ask for (from CuPy's pool, per call)
WORKSPACE = 32 << 20

#: dtype -> (cudaDataType, compute type, ctypes scalar of alpha/beta)
TYPES = {np.dtype(np.float32): (CUDA_R_32F, CUBLAS_COMPUTE_32F, ctypes.c_float),
         np.dtype(np.float64): (CUDA_R_64F, CUBLAS_COMPUTE_64F, ctypes.c_double)}


class HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t: the algorithm (an opaque 64 bytes) and its needs."""
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t),
                ("state", ctypes.c_int), ("waves", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


@cache
def library():
    """libcublasLt, as CuPy's cuBLAS loaded it; None where it cannot be found or used."""
    try:
        lib = ctypes.CDLL(loaded("libcublasLt"))
        handle = ctypes.c_void_p()
        if lib.cublasLtCreate(ctypes.byref(handle)) != 0:
            return None
    except OSError:
        return None
    p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.cublasLtMatmul.argtypes = [p, p, p, p, p, p, p, p, p, p, p, p, p, p, s, p]
    lib.cublasLtMatmulDescSetAttribute.argtypes = [p, i, p, s]
    lib.cublasLtMatrixLayoutCreate.argtypes = [p, i, ctypes.c_uint64, ctypes.c_uint64,
                                               ctypes.c_int64]
    lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [p, i, p, s]
    lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [p, p, p, p, p, p, p, i, p, p]
    lib.handle = handle
    return lib


class Plan:
    """The descriptor, layouts and algorithm of one (dtype, N, K, O) product."""

    def __init__(self, lib, dtype, n: int, k: int, o: int):
        data_type, compute, self.scalar = TYPES[dtype]
        self.desc, self.layouts = ctypes.c_void_p(), [ctypes.c_void_p() for _ in range(3)]
        check(lib.cublasLtMatmulDescCreate(ctypes.byref(self.desc), compute, data_type))
        for attribute, value in ((DESC_TRANSA, CUBLAS_OP_T), (DESC_TRANSB, CUBLAS_OP_N),
                                 (DESC_EPILOGUE, EPILOGUE_BIAS)):
            self.set(lib, attribute, ctypes.c_int32(value))
        # column-major: out^T (O x N) = weight (O x K, stored as K x O) ^T @ x^T (K x N)
        for layout, (rows, cols, ld) in zip(self.layouts, ((k, o, k), (k, n, k), (o, n, o))):
            check(lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), data_type, rows, cols,
                                                 ld))
        preference = ctypes.c_void_p()
        check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(preference)))
        limit = ctypes.c_uint64(WORKSPACE)
        check(lib.cublasLtMatmulPreferenceSetAttribute(
            preference, PREF_MAX_WORKSPACE_BYTES, ctypes.byref(limit), ctypes.sizeof(limit)))
        self.result, found = HeuristicResult(), ctypes.c_int(0)
        a, b, c = self.layouts
        check(lib.cublasLtMatmulAlgoGetHeuristic(
            lib.handle, self.desc, a, b, c, c, preference, 1, ctypes.byref(self.result),
            ctypes.byref(found)))
        lib.cublasLtMatmulPreferenceDestroy(preference)
        if found.value < 1:
            raise RuntimeError("cuBLASLt has no algorithm for this product")
        # the call's constant arguments, made once (ctypes objects cost microseconds each)
        self.bias = ctypes.c_void_p()
        self.bias_set = None  # the bias pointer the descriptor holds
        self.one, self.zero = ctypes.byref(self.scalar(1)), ctypes.byref(self.scalar(0))
        self.algo = ctypes.byref(self.result.algo)

    def __del__(self):
        lib = library()
        if lib is not None and getattr(self, "layouts", None) is not None:
            for layout in self.layouts:
                if layout.value:
                    lib.cublasLtMatrixLayoutDestroy(layout)
            if self.desc.value:
                lib.cublasLtMatmulDescDestroy(self.desc)

    def set(self, lib, attribute: int, value) -> None:
        check(lib.cublasLtMatmulDescSetAttribute(self.desc, attribute, ctypes.byref(value),
                                                 ctypes.sizeof(value)))


def check(status: int) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLASLt call failed with status {status}")


_PLANS: dict = {}
#: plans kept (a handful in training; descriptors of dropped ones are destroyed with them)
MAX_PLANS = 256


def _aligned(*arrays) -> bool:
    """cuBLASLt's heuristic assumes 256-byte aligned operands unless told otherwise: views
    that start elsewhere (x[1:]) take the product and the add."""
    return all(a.data.ptr % 256 == 0 for a in arrays)


def linear(x, weight, bias):
    """x (..., K) @ weight (O, K)^T + bias (O,) through the bias epilogue, or None."""
    if (bias is None or x.dtype not in TYPES or weight.dtype != x.dtype or bias.dtype != x.dtype
            or x.ndim < 2 or x.size == 0 or weight.size == 0 or not x.flags.c_contiguous
            or not weight.flags.c_contiguous or not bias.flags.c_contiguous
            or not _aligned(x, weight, bias)):
        return None
    lib = library()
    if lib is None:
        return None
    o, k = weight.shape
    n = x.size // k
    key = (x.dtype, n, k, o, x.device.id)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:  # shapes that never repeat (generation's growing T)
            _PLANS.clear()
        try:
            plan = _PLANS[key] = Plan(lib, x.dtype, n, k, o)
        except RuntimeError:
            _PLANS[key] = plan = False
    if plan is False:
        return None
    out = cupy.empty(x.shape[:-1] + (o,), dtype=x.dtype)
    if plan.bias_set != bias.data.ptr:  # a layer's bias stays where it is: set it once
        plan.bias.value = bias.data.ptr
        plan.set(lib, DESC_BIAS_POINTER, plan.bias)
        plan.bias_set = bias.data.ptr  # (only once cuBLASLt took it)
    size = plan.result.workspace
    workspace = cupy.empty(size, dtype=np.uint8) if size else None  # (held past the call)
    a, b, c = plan.layouts
    check(lib.cublasLtMatmul(
        lib.handle, plan.desc, plan.one, weight.data.ptr, a, x.data.ptr, b, plan.zero,
        out.data.ptr, c, out.data.ptr, c, plan.algo,
        workspace.data.ptr if size else None, size, cupy.cuda.get_current_stream().ptr))
    del workspace
    return out
