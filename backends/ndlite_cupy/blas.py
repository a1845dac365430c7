"""2-D matrix products through cuBLAS that can also be recorded in a CUDA graph.

cuBLAS supports stream capture, but CuPy refuses any cuBLAS call while a stream is capturing
(its wrappers raise NotImplementedError before reaching cuBLAS). `matmul` here calls
cublasGemmEx through ctypes, on CuPy's own handle and current stream, with exactly the
arguments cupy.matmul passes for a 2-D product: transposed operands by flag (a transposed
view is never copied), float32 in CUBLAS_COMPUTE_32F (no TF32), float16/bfloat16 in
CUBLAS_COMPUTE_32F too (float32 accumulation), float64 in CUBLAS_COMPUTE_64F, the default
algorithm with tensor ops allowed as CuPy asks from compute capability 8.0. So a product
recorded in a graph equals the eager one bit for bit.
"""

from __future__ import annotations

import ctypes
import re
from functools import cache

import cupy
import numpy as np

from ndlite.dtypes import HALF

# cuBLAS / CUDA enum values (library ABI, stable across CUDA 11-13)
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF = 0, 1, 2, 14
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F = 68, 70
CUBLAS_GEMM_DEFAULT, CUBLAS_GEMM_DEFAULT_TENSOR_OP = -1, 99

#: dtype -> (cudaDataType, compute type, ctypes scalar of alpha/beta)
TYPES = {np.dtype(np.float32): (CUDA_R_32F, CUBLAS_COMPUTE_32F, ctypes.c_float),
         np.dtype(np.float64): (CUDA_R_64F, CUBLAS_COMPUTE_64F, ctypes.c_double),
         # halves accumulate in float32 (float alpha/beta), as cupy.matmul asks for them
         np.dtype(np.float16): (CUDA_R_16F, CUBLAS_COMPUTE_32F, ctypes.c_float)}
if len(HALF) > 1:
    TYPES[HALF[1]] = (CUDA_R_16BF, CUBLAS_COMPUTE_32F, ctypes.c_float)


@cache
def _cublas():
    """The libcublas that CuPy loaded (found in this process's memory map)."""
    cupy.cuda.device.get_cublas_handle()  # makes CuPy load it
    path = None
    with open("/proc/self/maps") as maps:
        for line in maps:
            name = line.rsplit(None, 1)[-1]
            if re.search(r"/libcublas\.so(\.\d+)*$", name):
                path = name
                break
    lib = ctypes.CDLL(path or "libcublas.so")
    lib.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cublasSetStream_v2.restype = ctypes.c_int
    i, p = ctypes.c_int, ctypes.c_void_p
    lib.cublasGemmEx.argtypes = [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i]
    lib.cublasGemmEx.restype = ctypes.c_int
    ll = ctypes.c_longlong
    lib.cublasGemmStridedBatchedEx.argtypes = [p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p,
                                               p, i, i, ll, i, i, i]
    lib.cublasGemmStridedBatchedEx.restype = ctypes.c_int
    return lib


@cache
def _algorithm(device_id: int) -> int:
    major = cupy.cuda.runtime.getDeviceProperties(device_id)["major"]
    return CUBLAS_GEMM_DEFAULT_TENSOR_OP if major >= 8 else CUBLAS_GEMM_DEFAULT


def _operand(x, trans: int):
    """CuPy's _mat_to_cublas_contiguous: (array, transpose flag, leading dimension)."""
    size = x.itemsize
    if x.flags.f_contiguous:
        return x, trans, max(x.strides[1] // size, x.shape[0])
    if not x.flags.c_contiguous:
        x = x.copy()
    return x, 1 - trans, x.strides[0] // size


def matmul(a, b, out=None):
    """a @ b for 2-D a (N, K) and b (K, M) of one float dtype; `out`, if given, is a
    C-contiguous (N, M) array to write."""
    n, k = a.shape
    m = b.shape[1]
    if out is None:
        out = cupy.empty((n, m), dtype=a.dtype)
    if n == 0 or m == 0:
        return out
    if k == 0:
        out.fill(0)
        return out
    data_type, compute, scalar = TYPES[a.dtype]
    at, trans_a, ld_a = _operand(a.T, 0)  # as cupy.dot: a rolled to (K, N)
    b, trans_b, ld_b = _operand(b, 1)
    lib = _cublas()
    handle = cupy.cuda.device.get_cublas_handle()
    status = lib.cublasSetStream_v2(handle, cupy.cuda.get_current_stream().ptr)
    if status == 0:
        one, zero = scalar(1), scalar(0)
        status = lib.cublasGemmEx(
            handle, trans_b, trans_a, m, n, k, ctypes.byref(one), b.data.ptr, data_type, ld_b,
            at.data.ptr, data_type, ld_a, ctypes.byref(zero), out.data.ptr, data_type, m,
            compute, _algorithm(cupy.cuda.runtime.getDevice()))
    if status != 0:
        raise RuntimeError(f"cupy: cublasGemmEx of shapes {a.shape} and {b.shape} failed with "
                           f"cuBLAS status {status}")
    return out


def batched_matmul(a, b):
    """a (..., N, K) @ b (..., K, M), batch dims broadcast, of one dtype of TYPES, as one
    cublasGemmStridedBatchedEx (CuPy's matmul has no bfloat16 path): row-major products as
    column-major ones of the transposes, out^T = b^T a^T, each batch at its own stride."""
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    (n, k), m = a.shape[-2:], b.shape[-1]
    a = cupy.ascontiguousarray(cupy.broadcast_to(a, batch + (n, k)))
    b = cupy.ascontiguousarray(cupy.broadcast_to(b, batch + (k, m)))
    out = cupy.empty(batch + (n, m), dtype=a.dtype)
    if out.size == 0 or k == 0:
        out.fill(0)
        return out
    data_type, compute, scalar = TYPES[a.dtype]
    lib = _cublas()
    handle = cupy.cuda.device.get_cublas_handle()
    status = lib.cublasSetStream_v2(handle, cupy.cuda.get_current_stream().ptr)
    if status == 0:
        one, zero = scalar(1), scalar(0)
        status = lib.cublasGemmStridedBatchedEx(
            handle, 0, 0, m, n, k, ctypes.byref(one), b.data.ptr, data_type, m, k * m,
            a.data.ptr, data_type, k, n * k, ctypes.byref(zero), out.data.ptr, data_type, m,
            n * m, int(np.prod(batch, dtype=np.int64)), compute,
            _algorithm(cupy.cuda.runtime.getDevice()))
    if status != 0:
        raise RuntimeError(f"cupy: cublasGemmStridedBatchedEx of shapes {a.shape} and {b.shape} "
                           f"failed with cuBLAS status {status}")
    return out


def capturable_matmul(a, b):
    """The backend's matmul while a graph is recorded: 2-D float products through `matmul`,
    anything else through cupy.matmul (whose cuBLAS calls CuPy refuses in a capture)."""
    if a.ndim == 2 and b.ndim == 2 and a.dtype == b.dtype and a.dtype in TYPES:
        return matmul(a, b)
    if a.dtype == b.dtype and a.dtype in TYPES and a.ndim >= 2 and b.ndim >= 2:
        return batched_matmul(a, b)
    return cupy.matmul(a, b)
