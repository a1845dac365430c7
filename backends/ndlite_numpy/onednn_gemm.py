"""float32 matrix products through oneDNN's dnnl_sgemm (onednn.py's binding), where it is
installed: on the 2-core VM at 2 threads it ran a 1024^3 product in 4.0 ms against 7.7 ms for
NumPy's OpenBLAS (whose Haswell kernels the VM's OPENBLAS_CORETYPE selects) and the MLP's
256x784 @ 784x1024 in 0.8 against 1.5 ms (docs/DESIGN.md, "oneDNN").

2-D operands only, each row- or column-contiguous (a transposed weight, x @ W.T, is passed
with its transpose flag, not copied); stacks and other dtypes stay NumPy's. Deterministic for
a given thread count, like the convolutions.
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import onednn, threads

if onednn.available():
    _i64 = ctypes.c_int64
    onednn._lib.dnnl_sgemm.argtypes = [ctypes.c_char, ctypes.c_char, _i64, _i64, _i64,
                                       ctypes.c_float, ctypes.c_void_p, _i64, ctypes.c_void_p,
                                       _i64, ctypes.c_float, ctypes.c_void_p, _i64]


def _operand(x: np.ndarray):
    """(x, transpose flag, leading dimension) for a row-major GEMM, copying x only where
    neither its rows nor its columns are contiguous (an axis of length 1 has any stride)."""
    rows, cols = x.shape
    s0, s1 = x.strides
    if not (s0 % 4 or s1 % 4 or x.ctypes.data % 4):
        if (s1 == 4 or cols == 1) and (rows == 1 or s0 >= 4 * cols):
            return x, b"N", max(s0 // 4, cols)
        if (s0 == 4 or rows == 1) and (cols == 1 or s1 >= 4 * rows):
            return x, b"T", max(s1 // 4, rows)
    return x.copy(order="C"), b"N", cols


def matmul(a, b):
    """a @ b for float32 matrices a (m, k), b (k, n), or None where oneDNN does not take it."""
    if a.ndim != 2 or b.ndim != 2 or not onednn._takes(a, b) or b.shape[0] != a.shape[1]:
        return None
    (m, k), n = a.shape, b.shape[1]
    (a, ta, lda), (b, tb, ldb) = _operand(a), _operand(b)
    out = np.empty((m, n), np.float32)

    def product():
        onednn._ok(onednn._lib.dnnl_sgemm(ta, tb, m, n, k, 1.0, a.ctypes.data, lda,
                                          b.ctypes.data, ldb, 0.0, out.ctypes.data, n),
                   "dnnl_sgemm")

    try:
        onednn._locked(threads.total(), product)
    except onednn.DnnlError:  # (a failed product: the caller's BLAS path)
        return None
    return out
