"""Compiled, parallel copy kernels for the NumPy backend's convolution (numba, optional).

With numba installed (`pip install 'ndlite[cpu]'`) and NDLITE_NUMBA=1, convolution is
im2col into one (C*kh*kw, N*OH*OW) matrix by a parallel kernel, one BLAS product over the whole
batch on all of BLAS's threads, and a parallel transpose back to NCHW; the gradients are the
same two products and col2im. The kernels run on numba's threads without the GIL, so the
copies scale with the cores as the products do; the backend's own Python threads (threads.py),
which hold the GIL for each NumPy call, are not used there. Without numba, nn.py's pure NumPy
path runs: it is the fallback and the reference these kernels are tested against.

Deterministic: every output element of a kernel is written by one iteration, and col2im adds
each image channel's kh*kw contributions in a fixed order, whatever the thread count; the
products are BLAS's, deterministic for a given thread count.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from . import scratch
from . import threads as threads_

#: "0": no kernels (the pure NumPy path); "auto" (the default): the optimizer steps (optim.py)
#: only; "1": the convolution kernels too. Those lost to nn.py's NumPy path on both machines
#: measured (16-core Xeon, 16 threads: seed CNN step 165 vs 134 ms, VGG-style 361 vs 171 ms:
#: the whole-batch columns leave the cache), so they are opt-in (docs/DESIGN.md)
MODE = os.environ.get("NDLITE_NUMBA", "auto")

try:
    if MODE == "0":
        raise ImportError("NDLITE_NUMBA=0")
    import numba
    from numba import njit, prange

    if "NUMBA_THREADING_LAYER" not in os.environ:
        # workqueue's threads wait on a condition, not spinning: OpenMP's spin after every
        # kernel, on the cores BLAS is about to use (2-core VM: conv steps 3-8x slower)
        numba.config.THREADING_LAYER = "workqueue"
except ImportError as e:  # the pure NumPy path
    numba, _why = None, str(e)
else:
    _why = ""


def enabled() -> bool:
    return numba is not None


def status() -> str:
    """For `ndlite info`: which path the heavy ops take."""
    if numba is None:
        return f"NumPy only ({_why or 'numba not installed'}; pip install 'ndlite[cpu]')"
    ops = "optimizer steps and convolution" if MODE == "1" else \
        "optimizer steps (NDLITE_NUMBA=1 adds convolution)"
    return f"numba {numba.__version__}, {numba.config.THREADING_LAYER} layer: {ops}"


_lock = threading.Lock()  # the workqueue layer takes one launch at a time


def _launch(kernel, threads: int, *args) -> None:
    """kernel(*args) on `threads` of numba's threads, BLAS's workers asleep meanwhile."""
    with _lock, threads_.blas_held():
        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
        kernel(*args)


if numba is not None:
    _jit = njit(parallel=True, nogil=True, cache=True, fastmath=False)

    @njit(inline="always")
    def _inside(s, p, offset, size, out):
        """The outputs q in [lo, hi) whose tap q*s - p + offset falls inside [0, size)."""
        lo = max(0, -((offset - p) // s))  # ceil((p - offset) / s)
        hi = min(out, max(0, -((offset - p - size) // s)))  # ceil((size + p - offset) / s)
        return lo, max(lo, hi)

    @_jit
    def im2col(x, cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
        """cols[(c, i, j), (n, y, x)] = x[n, c, y*sh - ph + i*dh, x*sw - pw + j*dw] (0 outside)."""
        n_img, c_in, h, w = x.shape
        plane = oh * ow
        for t in prange(c_in * kh * kw * n_img):
            k, n = t // n_img, t % n_img
            c, r = k // (kh * kw), k % (kh * kw)
            i, j = r // kw, r % kw
            lo, hi = _inside(sw, pw, j * dw, w, ow)
            shift = j * dw - pw
            for y in range(oh):
                row = y * sh - ph + i * dh
                dst = cols[k, n * plane + y * ow:n * plane + (y + 1) * ow]
                if row < 0 or row >= h:
                    dst[:] = 0
                    continue
                src = x[n, c, row]
                dst[:lo] = 0
                for q in range(lo, hi):
                    dst[q] = src[q * sw + shift]
                dst[hi:] = 0

    @_jit
    def col2im(cols, grad, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
        """The adjoint of im2col: grad[n, c] = the sum of its windows' columns, kernel offsets
        in row-major order."""
        n_img, c_in, h, w = grad.shape
        plane = oh * ow
        for t in prange(n_img * c_in):
            n, c = t // c_in, t % c_in
            grad[n, c] = 0
            for i in range(kh):
                for j in range(kw):
                    k = (c * kh + i) * kw + j
                    lo, hi = _inside(sw, pw, j * dw, w, ow)
                    shift = j * dw - pw
                    for y in range(oh):
                        row = y * sh - ph + i * dh
                        if row < 0 or row >= h:
                            continue
                        src = cols[k, n * plane + y * ow:n * plane + (y + 1) * ow]
                        dst = grad[n, c, row]
                        for q in range(lo, hi):
                            dst[q * sw + shift] += src[q]

    @_jit
    def swap01(a, out):
        """out[j, i, :] = a[i, j, :] for 3-D arrays: (O, N, L) <-> (N, O, L)."""
        p, q, length = a.shape
        for t in prange(p * q):
            i, j = t // q, t % q
            for m in range(length):
                out[j, i, m] = a[i, j, m]


# ---- convolution through the kernels (groups of 1, float32 / float64) ------------------------


class _Conv:
    def __init__(self, input_shape, weight_shape, stride, padding, dilation):
        (self.n, self.c, self.h, self.w), (self.o, _, self.kh, self.kw) = \
            input_shape, weight_shape
        (self.sh, self.sw), (self.ph, self.pw), (self.dh, self.dw) = stride, padding, dilation
        self.oh = (self.h + 2 * self.ph - self.dh * (self.kh - 1) - 1) // self.sh + 1
        self.ow = (self.w + 2 * self.pw - self.dw * (self.kw - 1) - 1) // self.sw + 1
        self.k = self.c * self.kh * self.kw
        self.length = self.n * self.oh * self.ow

    def args(self):
        return (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw, self.dh, self.dw,
                self.oh, self.ow)


def wanted(threads: int) -> bool:
    """Whether the convolution kernels run (NDLITE_NUMBA, above; any thread count)."""
    return numba is not None and MODE == "1"


def applies(groups, threads: int, *arrays) -> bool:
    """Whether the kernels take this convolution: wanted, one group, float32 or float64."""
    if groups != 1 or not wanted(threads):
        return False
    dtype = arrays[0].dtype
    return dtype.char in "fd" and all(a.dtype == dtype for a in arrays)


def _columns(g: _Conv, x, threads: int):
    cols = scratch.buffer("im2col", (g.k, g.length), x.dtype)
    _launch(im2col, threads, np.ascontiguousarray(x), cols, *g.args())
    return cols


def _grad_rows(g: _Conv, grad_output, threads: int):
    """grad_output (N, O, OH, OW) as (O, N*OH*OW)."""
    rows = scratch.buffer("grad_rows", (g.o, g.n, g.oh * g.ow), grad_output.dtype)
    _launch(swap01, threads, np.ascontiguousarray(grad_output).reshape(g.n, g.o, -1), rows)
    return rows.reshape(g.o, g.length)


def conv2d(x, weight, stride, padding, dilation, threads: int):
    g = _Conv(x.shape, weight.shape, stride, padding, dilation)
    product = np.matmul(weight.reshape(g.o, g.k), _columns(g, x, threads))  # (O, N*OH*OW)
    out = np.empty((g.n, g.o, g.oh, g.ow), dtype=x.dtype)
    _launch(swap01, threads, product.reshape(g.o, g.n, -1), out.reshape(g.n, g.o, -1))
    return out


def conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation, threads: int):
    g = _Conv(x.shape, weight_shape, stride, padding, dilation)
    rows = _grad_rows(g, grad_output, threads)
    return np.matmul(rows, _columns(g, x, threads).T).reshape(weight_shape)


def conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation,
                      threads: int):
    g = _Conv(input_shape, weight.shape, stride, padding, dilation)
    cols = scratch.buffer("im2col", (g.k, g.length), grad_output.dtype)
    np.matmul(weight.reshape(g.o, g.k).T, _grad_rows(g, grad_output, threads), out=cols)
    grad = np.empty(input_shape, dtype=grad_output.dtype)
    _launch(col2im, threads, cols, grad, *g.args())
    return grad
