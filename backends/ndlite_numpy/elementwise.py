"""Compiled kernels for the memory-bound ops of a CNN step on the NumPy backend (numba,
optional; see kernels.py): ReLU, its backward from the saved output (the step fast path
relu_grad), a convolution's bias add (N, C, H, W) + (1, C, 1, 1), and the sums of its bias
gradient (every axis but 1) and of a Linear's (axis 0 of a matrix).

NumPy runs each of these on one core, as a generic ufunc loop that allocates its result (ReLU
as np.maximum, which also tests for NaN): a serial kernel writing into the result is 2.5-4x
faster on one core (2.4M floats relu: 0.18 against 0.68 ms). On several threads the work is cut
by `spread.spread` into contiguous pieces of at least `spread.MIN_ELEMENTS`, each piece the
serial kernel over its range: with oneDNN as one launch of the kernel's prange twin on numba's
omp layer, i.e. on oneDNN's own OpenMP workers (kernels.py says why), else on the backend's
Python pool (the kernels release the GIL, so the pool's cap for GIL-holding pieces does not
apply). The same serial kernels serve small arrays and a forked child on the calling thread.

Results are the NumPy path's bit for bit (elementwise: one rounding, NaN and -0.0 as
np.maximum / np.where give them) or, for the sums, float64 accumulations rounded once, every
output element summed by one loop in a fixed order: the same bits at any thread count. The
NumPy path (backend.py) stays the fallback: halves, integers, non-contiguous or small
operands, NDLITE_NUMBA=0.
"""

from __future__ import annotations

import numpy as np

from . import kernels, spread

#: smaller operands stay on NumPy (a numba call costs about a microsecond more than a ufunc's)
MIN_SIZE = 1 << 14

if kernels.numba is not None:
    from numba import njit, prange

    _serial = kernels._serial
    _sums = njit(nogil=True, cache=True, fastmath={"reassoc"})

    @_serial
    def _relu(x, out, zero, lo, hi):
        """out = maximum(x, 0): a NaN stays (its bits), -0.0 and 0.0 give 0.0 (zero: 0 in x's
        dtype)."""
        src, dst = x[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            v = src[i]
            dst[i] = v if (v > zero) | (v != v) else zero

    @_serial
    def _relu_grad(grad, y, out, zero, lo, hi):
        """out = grad where y > 0, else 0.0 (a NaN in y gives 0.0)."""
        g, s, dst = grad[lo:hi], y[lo:hi], out[lo:hi]
        for i in range(hi - lo):
            dst[i] = g[i] if s[i] > zero else zero

    @_serial
    def _bias_add(x3, bias, out3, lo, hi):
        """out3[n, c] = x3[n, c] + bias[c] over the planes t = n * C + c in [lo, hi): flat
        views and the channel counted along (a division per plane doubled the time of 2x2
        planes)."""
        c_in, s = x3.shape[1], x3.shape[2]
        xf, of = x3.reshape(-1), out3.reshape(-1)
        c = lo % c_in
        for t in range(lo, hi):
            b = bias[c]
            src, dst = xf[t * s:(t + 1) * s], of[t * s:(t + 1) * s]
            for j in range(s):
                dst[j] = src[j] + b
            c = c + 1 if c + 1 < c_in else 0

    @_sums
    def _channel_sums(x3, out, lo, hi):
        """out[c] = the float64 sum of x3[:, c, :] for c in [lo, hi): rows in order, each row
        in the order LLVM vectorizes it (`reassoc` only), fixed by the code, not the threads."""
        for c in range(lo, hi):
            total = 0.0
            for n in range(x3.shape[0]):
                row = x3[n, c]
                for j in range(x3.shape[2]):
                    total += row[j]
            out[c] = total

    @_serial
    def _column_sums(x, acc, out, lo, hi):
        """out[f] = the float64 sum of x[:, f] for f in [lo, hi), rows in order (acc: float64
        scratch of the columns' width)."""
        part = acc[lo:hi]
        for j in range(hi - lo):
            part[j] = 0.0
        for n in range(x.shape[0]):
            row = x[n, lo:hi]
            for j in range(hi - lo):
                part[j] += row[j]
        for j in range(hi - lo):
            out[lo + j] = part[j]


    # the same kernels over `parts` pieces as one parallel launch on numba's threading layer
    # (spread.py's "numba" mode; on the omp layer, the OpenMP pool that oneDNN's primitives
    # run on)
    _par = kernels._jit

    @_par
    def _relu_par(x, out, zero, n, parts):
        for p in prange(parts):
            _relu(x, out, zero, n * p // parts, n * (p + 1) // parts)

    @_par
    def _relu_grad_par(grad, y, out, zero, n, parts):
        for p in prange(parts):
            _relu_grad(grad, y, out, zero, n * p // parts, n * (p + 1) // parts)

    @_par
    def _bias_add_par(x3, bias, out3, n, parts):
        for p in prange(parts):
            _bias_add(x3, bias, out3, n * p // parts, n * (p + 1) // parts)

    @_par
    def _channel_sums_par(x3, out, n, parts):
        for p in prange(parts):
            _channel_sums(x3, out, n * p // parts, n * (p + 1) // parts)

    @_par
    def _column_sums_par(x, acc, out, n, parts):
        for p in prange(parts):
            _column_sums(x, acc, out, n * p // parts, n * (p + 1) // parts)


def _fits(*arrays) -> bool:
    """Whether the kernels take these operands: numba on, one float32/float64 dtype, C-contiguous,
    at least MIN_SIZE elements."""
    a = arrays[0]
    if kernels.numba is None or a.size < MIN_SIZE or a.dtype.char not in "fd":
        return False
    return all(v.dtype == a.dtype and v.flags.c_contiguous for v in arrays)


def relu(x):
    """maximum(x, 0) as a new array, or None where the kernels do not apply."""
    if not _fits(x):
        return None
    out, zero = np.empty(x.shape, x.dtype), x.dtype.type(0)
    flat, dst = x.reshape(-1), out.reshape(-1)
    spread.spread(x.size, x.size, _relu, _relu_par, flat, dst, zero)
    return out


def relu_grad(grad, y):
    """where(y > 0, grad, 0.0), or None where the kernels do not apply."""
    if grad.shape != y.shape or not _fits(grad, y):
        return None
    out, zero = np.empty(grad.shape, grad.dtype), grad.dtype.type(0)
    g, s, dst = grad.reshape(-1), y.reshape(-1), out.reshape(-1)
    spread.spread(grad.size, grad.size, _relu_grad, _relu_grad_par, g, s, dst, zero)
    return out


def bias_add(x, bias):
    """x + bias for x (N, C, *spatial) and bias (1, C, 1, ...) or (C, 1, ...): a convolution's
    bias; None where the kernels do not apply."""
    if x.ndim < 3 or bias.ndim > x.ndim or bias.size != x.shape[1] or not _fits(x, bias):
        return None
    shape = bias.shape if bias.ndim == x.ndim else (1,) * (x.ndim - bias.ndim) + bias.shape
    if shape[1] != x.shape[1] or any(d != 1 for i, d in enumerate(shape) if i != 1):
        return None
    n, c = x.shape[0], x.shape[1]
    out = np.empty(x.shape, x.dtype)
    x3, o3, b = x.reshape(n, c, -1), out.reshape(n, c, -1), bias.reshape(-1)
    spread.spread(n * c, x.size, _bias_add, _bias_add_par, x3, b, o3)
    return out


def channel_sum(x, axes, keepdims):
    """The sum over every axis but 1 (a convolution's bias gradient), float64 accumulation
    rounded once to x's dtype; None where the kernels do not apply."""
    if x.ndim < 3 or tuple(axes) != (0, *range(2, x.ndim)) or not _fits(x):
        return None
    n, c = x.shape[0], x.shape[1]
    x3, sums = x.reshape(n, c, -1), np.empty(c, np.float64)
    spread.spread(c, x.size, _channel_sums, _channel_sums_par, x3, sums)
    out = sums.astype(x.dtype)
    return out.reshape((1, c) + (1,) * (x.ndim - 2)) if keepdims else out


def column_sum(x, axes, keepdims):
    """The sum over axis 0 of a matrix (a Linear's bias gradient), float64 accumulation rounded
    once; None where the kernels do not apply."""
    if x.ndim != 2 or tuple(axes) != (0,) or not _fits(x):
        return None
    f = x.shape[1]
    acc, sums = np.empty(f, np.float64), np.empty(f, np.float64)
    spread.spread(f, x.size, _column_sums, _column_sums_par, x, acc, sums)
    out = sums.astype(x.dtype)
    return out.reshape(1, f) if keepdims else out


def sum_(x, axes, keepdims):
    """A bias gradient's sum (channel_sum, column_sum), or None for any other."""
    if x.ndim == 2:
        return column_sum(x, axes, keepdims)
    return channel_sum(x, axes, keepdims)


def with_bias_add(add):
    """The backend's `add` with the bias add of a large (N, C, ...) array taken by the kernel;
    the checks cost small operands a few attribute reads."""
    ndarray = np.ndarray

    def add_(a, b):
        if (a.__class__ is ndarray and b.__class__ is ndarray and a.ndim >= 3
                and a.size >= MIN_SIZE and b.size == a.shape[1] and b.ndim > 1):
            out = bias_add(a, b)
            if out is not None:
                return out
        return add(a, b)

    add_.__name__ = "add"
    return add_
