"""Batch norm as one pass-fused numba kernel per direction (numba optional: norm.py's NumPy
passes are the fallback and the reference).

norm.py's forward reads and writes its (N, C, S) input in five whole-array NumPy passes and
its backward in about a dozen, all on one core; with oneDNN's convolutions (onednn.py) they
were a fifth of the VGG-style step on the 2-core VM. Here each channel is one iteration of a
parallel loop: the forward reads x twice (its sum, then the sum of squares about the mean)
and writes y once; the backward reads x and the gradient twice (the two sums, then the
gradient) and writes once.

Sums accumulate in float64 whatever the dtype, in an order LLVM fixes when it vectorizes the
loop (`reassoc` only, no contraction into fused multiply-adds): a channel's sums do not depend
on the thread count, so the results are the same bits at any count. The rest is norm.py's
formulas in the input's dtype: invstd = 1 / sqrt(var + eps), y = (x - mean) * scale + shift,
grad_x = grad * k1 - (x - mean) * k2 - k3.
"""

from __future__ import annotations

import numpy as np

from . import kernels, threads

#: channels whose planes (the trailing size S) are shorter stay on norm.py: each image's row of
#: a channel is one short strided run there
MIN_PLANE = 64
#: smaller inputs stay on norm.py: a parallel launch costs ~45 us, NumPy's passes ~0.7 ns an
#: element (2-core VM)
MIN_SIZE = 1 << 16

if kernels.numba is not None:
    from numba import njit, prange

    _sums = njit(nogil=True, cache=True, fastmath={"reassoc"})
    _par = njit(parallel=True, nogil=True, cache=True)

    @_sums
    def _moments(x3, ch):
        """(mean, biased variance) of channel ch, in float64."""
        n, s = x3.shape[0], x3.shape[2]
        total = 0.0
        for i in range(n):
            row = x3[i, ch]
            for j in range(s):
                total += row[j]
        mean = total / (n * s)
        squares = 0.0
        for i in range(n):
            row = x3[i, ch]
            for j in range(s):
                d = row[j] - mean
                squares += d * d
        return mean, squares / (n * s)

    @_sums
    def _grad_sums(g3, x3, ch, mu):
        """(sum of grad, sum of grad * (x - mean)) over channel ch, in float64."""
        n, s = x3.shape[0], x3.shape[2]
        total, dot = 0.0, 0.0
        for i in range(n):
            gr, xr = g3[i, ch], x3[i, ch]
            for j in range(s):
                total += gr[j]
                dot += gr[j] * (xr[j] - mu)
        return total, dot

    @_par
    def _forward(x3, weight, bias, shift, eps, one, y, mean, invstd, var):
        for ch in prange(x3.shape[1]):
            m64, v64 = _moments(x3, ch)
            mean[ch], var[ch] = m64, v64
            inv = one / np.sqrt(var[ch] + eps)
            invstd[ch] = inv
            k, b, mu = inv * weight[ch], bias[ch], mean[ch]
            for i in range(x3.shape[0]):
                src, dst = x3[i, ch], y[i, ch]
                if shift:
                    for j in range(x3.shape[2]):
                        dst[j] = (src[j] - mu) * k + b
                else:
                    for j in range(x3.shape[2]):
                        dst[j] = (src[j] - mu) * k

    @_par
    def _backward(g3, x3, weight, mean, invstd, count, out, sum_dy, sum_dy_xhat):
        for ch in prange(x3.shape[1]):
            mu, inv = mean[ch], invstd[ch]
            t64, d64 = _grad_sums(g3, x3, ch, mu)
            sum_dy[ch], sum_dy_xhat[ch] = t64, d64
            sdy, sdx = sum_dy[ch], sum_dy_xhat[ch] * inv
            sum_dy_xhat[ch] = sdx
            k1 = inv * weight[ch]
            k2, k3 = k1 * inv * sdx / count, k1 * sdy / count
            for i in range(x3.shape[0]):
                gr, xr, dst = g3[i, ch], x3[i, ch], out[i, ch]
                for j in range(x3.shape[2]):
                    dst[j] = gr[j] * k1 - (xr[j] - mu) * k2 - k3


def applies(x3: np.ndarray, *others) -> bool:
    """Whether the kernels take this (N, C, S) batch norm: numba on, float32 or float64
    alike, planes of at least MIN_PLANE, at least MIN_SIZE elements."""
    return (kernels.applies(x3, *others) and x3.shape[2] >= MIN_PLANE and x3.size >= MIN_SIZE
            and kernels.parallel())


def _per_channel(v, c: int, dtype) -> np.ndarray:
    return np.ones(c, dtype) if v is None else np.ascontiguousarray(v, dtype=dtype)


def batch_norm(x3, weight, bias, eps):
    """(y (N, C, S), mean, invstd, var) as norm.batch_norm on a C-contiguous x3."""
    dtype, c = x3.dtype, x3.shape[1]
    y = np.empty_like(x3)
    mean, invstd, var = (np.empty(c, dtype) for _ in range(3))
    kernels._launch(_forward, threads.total(), x3, _per_channel(weight, c, dtype),
                    _per_channel(bias, c, dtype), bias is not None, dtype.type(eps),
                    dtype.type(1), y, mean, invstd, var)
    return y, mean, invstd, var


def batch_norm_grad(g3, x3, weight, mean, invstd):
    """(grad_x (N, C, S), sum of grad * xhat, sum of grad) as norm.batch_norm_grad."""
    dtype, c = x3.dtype, x3.shape[1]
    out = np.empty_like(x3)
    sum_dy, sum_dy_xhat = np.empty(c, dtype), np.empty(c, dtype)
    kernels._launch(_backward, threads.total(), g3, x3, _per_channel(weight, c, dtype),
                    np.ascontiguousarray(mean, dtype=dtype),
                    np.ascontiguousarray(invstd, dtype=dtype),
                    dtype.type(x3.shape[0] * x3.shape[2]), out, sum_dy, sum_dy_xhat)
    return out, sum_dy_xhat, sum_dy
