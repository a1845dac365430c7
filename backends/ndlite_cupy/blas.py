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


def loaded(name: str) -> str:
    """The path of the library `name` (libcublas, libcublasLt) that CuPy loaded, found in this
    process's memory map, else the bare name for the loader to find."""
    cupy.cuda.device.get_cublas_handle()  # makes CuPy load cuBLAS (and cuBLASLt with it)
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.rsplit(None, 1)[-1]
            if re.search(rf"/{name}\.so(\.\d+)*$", path):
                return path
    return f"{name}.so"


@cache
def _cublas():
    """The libcublas that CuPy loaded."""
    lib = ctypes.CDLL(loaded("libcublas"))
    lib.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cublasSetStream_v2.restype = ctypes.c_int
    i, p = ctypes.c_int, ctypes.c_void_p
    lib.cublasGemmEx.argtypes = [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i]
    lib.cublasGemmEx.restype = ctypes.c_int
    ll = ctypes.c_longlong
    lib.cublasGemmStridedBatchedEx.argtypes = [p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p,
                                               p, i, i, ll, i, i, i]
    lib.cublasGemmStridedBatchedEx.restype = ctypes.c_int
    lib.cublasGemmBatchedEx.argtypes = [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i,
                                        i]
    lib.cublasGemmBatchedEx.restype = ctypes.c_int
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


#: the most batch dims a strided product takes (more: CuPy's matmul, on copies)
BATCH_DIMS = 4

_POINTERS = r"""
extern "C" __global__ void ndl_batch_pointers(
    unsigned long long* out, long long count, unsigned long long a, unsigned long long b,
    unsigned long long c, long long c_step, long long n1, long long n2, long long n3,
    long long a0, long long a1, long long a2, long long a3,
    long long b0, long long b1, long long b2, long long b3) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  long long r = i;
  const long long i3 = r % n3; r /= n3;
  const long long i2 = r % n2; r /= n2;
  const long long i1 = r % n1;
  const long long i0 = r / n1;
  out[i] = a + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3;
  out[count + i] = b + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3;
  out[2 * count + i] = c + i * c_step;
}
"""


@cache
def _pointer_kernel():
    return cupy.RawKernel(_POINTERS, "ndl_batch_pointers")


def matrix_layout(x):
    """(cuBLAS transpose flag, leading dimension) that reads the last two axes of x in place
    as matrices for `strided_matmul` (the flag as `_operand` gives it: 0 for rows of unit
    stride, 1 for columns of unit stride), or None when neither axis has unit stride."""
    (r, c), (sr, sc), size = x.shape[-2:], x.strides[-2:], x.itemsize
    if sc == size and sr % size == 0 and sr // size >= max(c, 1):
        return 0, sr // size
    if sr == size and sc % size == 0 and sc // size >= max(r, 1):
        return 1, sc // size
    return None


def _batch_strides(x, batch: tuple) -> list | None:
    """x's byte strides over the broadcast `batch` dims (0 where x is broadcast)."""
    lead = len(batch) - (x.ndim - 2)
    strides = [0] * lead + [s if n > 1 else 0 for n, s in zip(x.shape[:-2], x.strides[:-2])]
    return strides if all(s >= 0 for s in strides) else None


def strided_matmul(a, b):
    """a (..., N, K) @ b (..., K, M) of one dtype of TYPES read where they lie, or None when
    they cannot be: cuBLAS's pointer-array batched GEMM, the pointers written on the device
    by one small kernel (nothing crosses from the host: the call stays asynchronous and can
    be recorded in a CUDA graph). CuPy's matmul copies each operand that is not contiguous:
    the heads of an attention layer, views of one (B, T, 3, H, hs) buffer, took 12 copies a
    layer in a GPT step, 4 ms of its GPU time on an H100. Each product is a cuBLAS GEMM of
    the flags and compute type `matmul` uses (no TF32), but cublasGemmBatchedEx may pick
    other kernels than CuPy's strided batch of copies: within the contraction tolerance of
    that result, and bitwise the same run to run."""
    if a.dtype != b.dtype or a.dtype not in TYPES or min(a.ndim, b.ndim) < 2:
        return None
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    layout_a, layout_b = matrix_layout(a), matrix_layout(b)
    strides_a, strides_b = _batch_strides(a, batch), _batch_strides(b, batch)
    if (not 1 <= len(batch) <= BATCH_DIMS or layout_a is None or layout_b is None
            or strides_a is None or strides_b is None):
        return None
    (n, k), m = a.shape[-2:], b.shape[-1]
    out = cupy.empty(batch + (n, m), dtype=a.dtype)
    count = out.size // max(n * m, 1)
    if out.size == 0 or k == 0:
        out.fill(0)
        return out
    (trans_a, ld_a), (trans_b, ld_b) = layout_a, layout_b  # a read as (K, N), as in `matmul`
    pad = [1] * (BATCH_DIMS - len(batch))
    sizes = pad + list(batch)
    strides_a, strides_b = [0] * len(pad) + strides_a, [0] * len(pad) + strides_b
    pointers = cupy.empty((3 * count,), dtype=np.uint64)
    _pointer_kernel()(((count + 255) // 256,), (256,), (
        pointers, np.int64(count), np.uint64(a.data.ptr), np.uint64(b.data.ptr),
        np.uint64(out.data.ptr), np.int64(n * m * out.itemsize),
        *(np.int64(v) for v in sizes[1:]), *(np.int64(v) for v in strides_a),
        *(np.int64(v) for v in strides_b)))
    data_type, compute, scalar = TYPES[a.dtype]
    lib = _cublas()
    handle = cupy.cuda.device.get_cublas_handle()
    status = lib.cublasSetStream_v2(handle, cupy.cuda.get_current_stream().ptr)
    if status == 0:
        one, zero, step = scalar(1), scalar(0), count * 8
        status = lib.cublasGemmBatchedEx(
            handle, trans_b, trans_a, m, n, k, ctypes.byref(one), pointers.data.ptr + step,
            data_type, ld_b, pointers.data.ptr, data_type, ld_a, ctypes.byref(zero),
            pointers.data.ptr + 2 * step, data_type, m, count, compute,
            _algorithm(cupy.cuda.runtime.getDevice()))
    if status != 0:
        raise RuntimeError(f"cupy: cublasGemmBatchedEx of shapes {a.shape} and {b.shape} "
                           f"failed with cuBLAS status {status}")
    return out


def product(a, b, recording: bool):
    """The backend's matmul of arrays that are not a vector product nor one flattened GEMM:
    batched operands that are not both contiguous read in place (`strided_matmul`), else
    CuPy's matmul, or while a graph records, and for halves (CuPy has no bfloat16 product),
    `capturable_matmul`."""
    if max(a.ndim, b.ndim) > 2 and not (a.flags.c_contiguous and b.flags.c_contiguous):
        out = strided_matmul(a, b)
        if out is not None:
            return out
    if recording or a.dtype in HALF:
        return capturable_matmul(a, b)
    return cupy.matmul(a, b)
