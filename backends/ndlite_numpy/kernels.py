"""Compiled kernels for the NumPy backend (numba, optional: `pip install 'ndlite[cpu]'`).

Convolution is im2col and a BLAS product, as in nn.py's NumPy path, but cut into chunks of a
few images whose columns fit in the core's L2 cache: a serial numba kernel writes one chunk's
columns straight from the NCHW input (padding by bounds, no padded copy), the product reads
them from cache and writes NCHW output directly (one GEMM per image, no layout transposes).
Each of the backend's threads (threads.py) takes a contiguous piece of the batch and runs its
chunks with single-threaded BLAS; the kernels release the GIL (`nogil`) and so do BLAS calls,
so the threads do not queue for it. The input gradient is the transposed product per chunk and
a col2im kernel that writes each image's gradient once, adding the kernel offsets in row-major
order; the weight gradient sums the chunks' products in chunk order, then the pieces' sums in
piece order. 3x3 stride-1 convolutions take Winograd's algorithm instead (winograd.py), max
pooling its own kernels (pooling.py).

Earlier, one im2col of the whole batch by a parallel kernel and one product on all BLAS
threads lost to the NumPy path (the columns left the cache: docs/DESIGN.md); the chunks are
what won. The pure NumPy path (nn.py) remains the fallback (NDLITE_NUMBA=0, numba missing,
other dtypes) and the reference these kernels are tested against
(tests/backends/test_numpy_kernels.py).

Deterministic: a piece's chunks depend only on the shapes and the thread count, every output
element of a kernel is written by one loop iteration in a fixed order, and the products are
BLAS's, deterministic for given shapes.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from . import scratch
from . import threads as threads_

#: "0": no kernels (the pure NumPy path); anything else (default "auto"): the kernels where
#: they apply
MODE = os.environ.get("NDLITE_NUMBA", "auto")
#: bytes of one chunk's im2col columns: about half of a core's L2 cache (1 MiB on the 2-core
#: VM's EPYC; 2 MiB on the 16-core Xeon), so that the product reads them from cache
CHUNK_BYTES = 512 << 10
#: output planes smaller than this (OH*OW) take one product per chunk, not per image
WIDE_PIXELS = 64

try:
    if MODE == "0":
        raise ImportError("NDLITE_NUMBA=0")
    import numba
    from numba import njit

    if "NUMBA_THREADING_LAYER" not in os.environ:
        from . import onednn

        # With oneDNN, its OpenMP pool (libgomp, one per process: PyTorch's copy has the same
        # soname, so the first loaded serves all) runs the convolutions and products, and its
        # workers spin for milliseconds after each primitive; numba's omp layer runs the
        # parallel kernels on those same workers, where threads of another pool (workqueue's,
        # the backend's) would compete with them for the cores (2-core VM, 2 threads: seed
        # CNN step 19.5 -> 16.2 ms, VGG-style 33.5 -> 25.6, alternated runs). Without oneDNN,
        # OpenBLAS's threads do the products and spin after them: workqueue's threads wait on
        # a condition instead (the omp layer there: VGG-style steps 3-8x slower).
        numba.config.THREADING_LAYER = "omp" if onednn.available() else "workqueue"
except ImportError as e:  # the pure NumPy path
    numba, _why = None, str(e)
else:
    _why = ""

_forked = False  # in a forked child (see parallel)


def _after_fork():
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork)


def parallel() -> bool:
    """Whether parallel (prange) kernels may be launched: not in a forked child on the omp
    layer (GNU OpenMP's threads do not survive fork(); numba then kills the process at the
    launch): the callers run their serial kernels or the NumPy path there."""
    return numba is not None and not (_forked and layer() not in ("workqueue", "tbb"))


def layer() -> str:
    """numba's threading layer: the one chosen, or the one loaded once a kernel ran."""
    try:
        return numba.threading_layer()
    except ValueError:  # not loaded yet
        return numba.config.THREADING_LAYER


def enabled() -> bool:
    return numba is not None


class disabled:
    """Context manager: the pure NumPy paths inside, what NDLITE_NUMBA=0 runs (tests and
    benchmarks compare against them; onednn.disabled() is its twin for oneDNN)."""

    def __enter__(self):
        global numba
        self.saved, numba = numba, None

    def __exit__(self, *exc):
        global numba
        numba = self.saved


def status() -> str:
    """For `ndlite info`: which path the heavy ops take."""
    if numba is None:
        return f"NumPy only ({_why or 'numba not installed'}; pip install 'ndlite[cpu]')"
    return (f"numba {numba.__version__}, {layer()} layer: convolution "
            "(im2col by cache-sized chunks; Winograd F(2x2, 3x3)), max pooling, batch norm, "
            "ReLU, bias add and sums, optimizer steps")


_lock = threading.Lock()  # numba takes one parallel launch at a time (workqueue, omp)


def _launch(kernel, threads: int, *args) -> None:
    """A parallel kernel(*args) on `threads` of numba's threads, BLAS's workers asleep. On the
    omp layer numba sets libgomp's thread count, which oneDNN and PyTorch share: given back
    after the launch, as onednn.py's calls give it back."""
    from . import onednn  # (here: its library loads only where kernels launch)

    gomp = onednn._gomp if onednn._lib is not None else None
    with _lock, threads_.blas_held():
        before = gomp.omp_get_max_threads() if gomp is not None else None
        try:
            numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
            kernel(*args)
        finally:
            if before is not None:
                gomp.omp_set_num_threads(before)


if numba is not None:
    _jit = njit(parallel=True, nogil=True, cache=True, fastmath=False)  # optim.py's kernels
    _serial = njit(nogil=True, cache=True, fastmath=False)  # run on the backend's threads

    @njit(inline="always")
    def _inside(s, p, offset, size, out):
        """The outputs q in [lo, hi) whose tap q*s - p + offset falls inside [0, size);
        0 <= lo <= hi <= out."""
        lo = min(out, max(0, -((offset - p) // s)))  # ceil((p - offset) / s)
        hi = min(out, max(0, -((offset - p - size) // s)))  # ceil((size + p - offset) / s)
        return lo, max(lo, hi)

    @_serial
    def _im2col_unit(x, n0, m_img, cols, stride_m, stride_k, kh, kw, sh, ph, pw, dh, dw, oh,
                     ow):
        """im2col for a width stride of 1: every window row is a contiguous run of the input.
        Indices come from views and range(0, ...), so they are provably >= 0: numba then checks
        no negative index and LLVM vectorizes the copies (several times faster)."""
        c_in, h, w = x.shape[1], x.shape[2], x.shape[3]
        xf = x.reshape(-1)
        for m in range(m_img):
            for c in range(c_in):
                plane = ((n0 + m) * c_in + c) * h * w
                for i in range(kh):
                    for j in range(kw):
                        d = m * stride_m + ((c * kh + i) * kw + j) * stride_k
                        lo, hi = _inside(1, pw, j * dw, w, ow)
                        for y in range(oh):
                            dst = cols[d + y * ow:d + (y + 1) * ow]
                            row = y * sh - ph + i * dh
                            if row < 0 or row >= h:
                                for q in range(ow):
                                    dst[q] = 0
                                continue
                            start = plane + row * w + lo + j * dw - pw
                            src, part = xf[start:start + hi - lo], dst[lo:hi]
                            for q in range(lo):
                                dst[q] = 0
                            for q in range(hi - lo):
                                part[q] = src[q]
                            for q in range(hi, ow):
                                dst[q] = 0

    @_serial
    def _im2col_strided(x, n0, m_img, cols, stride_m, stride_k, kh, kw, sh, sw, ph, pw, dh,
                        dw, oh, ow):
        """im2col for any strides (element by element)."""
        c_in, h, w = x.shape[1], x.shape[2], x.shape[3]
        for m in range(m_img):
            for c in range(c_in):
                for i in range(kh):
                    for j in range(kw):
                        d = m * stride_m + ((c * kh + i) * kw + j) * stride_k
                        for y in range(oh):
                            row = y * sh - ph + i * dh
                            for q in range(ow):
                                col = q * sw - pw + j * dw
                                inside = 0 <= row < h and 0 <= col < w
                                cols[d + y * ow + q] = x[n0 + m, c, row, col] if inside else 0

    @_serial
    def _col2im_unit(cols, grad, n0, m_img, stride_m, stride_k, kh, kw, sh, ph, pw, dh, dw, oh,
                     ow):
        """The adjoint of _im2col_unit: grad[n0 + m, c] is the sum of its windows' columns,
        kernel offsets in row-major order."""
        c_in, h, w = grad.shape[1], grad.shape[2], grad.shape[3]
        gf = grad.reshape(-1)
        for m in range(m_img):
            for c in range(c_in):
                plane = ((n0 + m) * c_in + c) * h * w
                dst = gf[plane:plane + h * w]
                for q in range(h * w):
                    dst[q] = 0
                for i in range(kh):
                    for j in range(kw):
                        d = m * stride_m + ((c * kh + i) * kw + j) * stride_k
                        lo, hi = _inside(1, pw, j * dw, w, ow)
                        for y in range(oh):
                            row = y * sh - ph + i * dh
                            if row < 0 or row >= h:
                                continue
                            src = cols[d + y * ow + lo:d + y * ow + hi]
                            start = row * w + lo + j * dw - pw
                            part = dst[start:start + hi - lo]
                            for q in range(hi - lo):
                                part[q] += src[q]

    @_serial
    def _col2im_strided(cols, grad, n0, m_img, stride_m, stride_k, kh, kw, sh, sw, ph, pw, dh,
                        dw, oh, ow):
        """The adjoint of _im2col_strided, in the same order as _col2im_unit."""
        c_in, h, w = grad.shape[1], grad.shape[2], grad.shape[3]
        for m in range(m_img):
            for c in range(c_in):
                grad[n0 + m, c] = 0
                for i in range(kh):
                    for j in range(kw):
                        d = m * stride_m + ((c * kh + i) * kw + j) * stride_k
                        for y in range(oh):
                            row = y * sh - ph + i * dh
                            for q in range(ow):
                                col = q * sw - pw + j * dw
                                if 0 <= row < h and 0 <= col < w:
                                    grad[n0 + m, c, row, col] += cols[d + y * ow + q]


def im2col(x, n0, m_img, cols, stride_m, stride_k, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """cols[m*stride_m + (c, i, j)*stride_k + (y, x)] = x[n0 + m, c, y*sh - ph + i*dh,
    x*sw - pw + j*dw], 0 outside the image, for the images n0 .. n0 + m_img - 1 (x
    C-contiguous, cols flat)."""
    if sw == 1:
        _im2col_unit(x, n0, m_img, cols, stride_m, stride_k, kh, kw, sh, ph, pw, dh, dw, oh, ow)
    else:
        _im2col_strided(x, n0, m_img, cols, stride_m, stride_k, kh, kw, sh, sw, ph, pw, dh, dw,
                        oh, ow)


def col2im(cols, grad, n0, m_img, stride_m, stride_k, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """The adjoint of im2col (cols laid out as there): writes grad[n0:n0 + m_img] whole,
    adding each element's kernel offsets in row-major order."""
    if sw == 1:
        _col2im_unit(cols, grad, n0, m_img, stride_m, stride_k, kh, kw, sh, ph, pw, dh, dw, oh,
                     ow)
    else:
        _col2im_strided(cols, grad, n0, m_img, stride_m, stride_k, kh, kw, sh, sw, ph, pw, dh,
                        dw, oh, ow)


# ---- convolution by chunks of images (float32 / float64, any groups) --------------------------


class _Conv:
    """One convolution's sizes, its pieces (one per thread) and its chunk of images."""

    def __init__(self, input_shape, weight_shape, stride, padding, dilation, groups, dtype):
        (self.n, self.c, self.h, self.w), (self.o, self.cg, self.kh, self.kw) = \
            input_shape, weight_shape
        (self.sh, self.sw), (self.ph, self.pw), (self.dh, self.dw) = stride, padding, dilation
        self.groups, self.og, self.dtype = groups, self.o // groups, np.dtype(dtype)
        self.oh = (self.h + 2 * self.ph - self.dh * (self.kh - 1) - 1) // self.sh + 1
        self.ow = (self.w + 2 * self.pw - self.dw * (self.kw - 1) - 1) // self.sw + 1
        self.p, self.kg = self.oh * self.ow, self.cg * self.kh * self.kw
        self.k = self.c * self.kh * self.kw  # rows of an image's columns, all groups
        self.pieces = threads_.plan(self.n, self.n * self.o * self.p * self.kg)
        per_image = self.k * self.p * self.dtype.itemsize
        self.chunk = max(1, min(self.n, CHUNK_BYTES // max(per_image, 1)))
        # small output planes: one product for the chunk, its columns laid out (rows, image,
        # pixel), and the output transposed after (per image, the product would be skinny)
        self.wide = self.p < WIDE_PIXELS

    def args(self):
        return (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw, self.dh, self.dw,
                self.oh, self.ow)

    def strides(self, m: int) -> tuple:
        """The element strides of image and row in a chunk of m images' columns."""
        return (self.p, m * self.p) if self.wide else (self.k * self.p, self.p)

    def run(self, part):
        """part(i, lo, hi, cols, rows) for every chunk [lo, hi) of every piece i, the pieces
        at once; cols, rows: piece i's flat scratch for one chunk's columns and for one chunk
        of output rows transposed."""
        cols = [scratch.buffer(("kcols", i), (self.chunk * self.k * self.p,), self.dtype)
                for i in range(len(self.pieces))]
        rows = [scratch.buffer(("krows", i), (self.chunk * self.o * self.p,), self.dtype)
                for i in range(len(self.pieces))]

        def piece(i, lo, hi):
            for a in range(lo, hi, self.chunk):
                part(i, a, min(hi, a + self.chunk), cols[i], rows[i])

        return threads_.run(piece, [(i, *p) for i, p in enumerate(self.pieces)])


def applies(*arrays) -> bool:
    """Whether the kernels take an op on these arrays: on, float32 or float64 alike."""
    if numba is None:
        return False
    dtype = arrays[0].dtype
    return dtype.char in "fd" and all(a.dtype == dtype for a in arrays)


def conv2d(x, weight, stride, padding, dilation, groups):
    g = _Conv(x.shape, weight.shape, stride, padding, dilation, groups, x.dtype)
    x, out = np.ascontiguousarray(x), np.empty((g.n, g.o, g.oh, g.ow), dtype=g.dtype)
    w = np.ascontiguousarray(weight).reshape(groups, g.og, g.kg)

    def part(i, lo, hi, flat, rows):
        m = hi - lo
        im2col(x, lo, m, flat, *g.strides(m), *g.args())
        if not g.wide:  # one product per image, written in place
            np.matmul(w, flat[:m * g.k * g.p].reshape(m, groups, g.kg, g.p),
                      out=out[lo:hi].reshape(m, groups, g.og, g.p))
            return
        prod = rows[:g.o * m * g.p].reshape(groups, g.og, m * g.p)
        np.matmul(w, flat[:m * g.k * g.p].reshape(groups, g.kg, m * g.p), out=prod)
        np.copyto(out[lo:hi].reshape(m, g.o, g.p), prod.reshape(g.o, m, g.p).transpose(1, 0, 2))

    g.run(part)
    return out


def conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation, groups):
    g = _Conv(x.shape, weight_shape, stride, padding, dilation, groups, x.dtype)
    g.wide = True  # the chunk's products summed by the product itself
    x, go = np.ascontiguousarray(x), np.ascontiguousarray(grad_output)
    sums = [np.zeros((groups, g.og, g.kg), dtype=g.dtype) for _ in g.pieces]
    prods = [scratch.buffer(("kprod", i), (groups, g.og, g.kg), g.dtype)
             for i in range(len(g.pieces))]

    def part(i, lo, hi, flat, rows):
        m = hi - lo
        im2col(x, lo, m, flat, *g.strides(m), *g.args())  # (rows, image, pixel)
        rows = rows[:g.o * m * g.p].reshape(g.o, m, g.p)
        np.copyto(rows, go[lo:hi].reshape(m, g.o, g.p).transpose(1, 0, 2))
        np.matmul(rows.reshape(groups, g.og, m * g.p),
                  flat[:m * g.k * g.p].reshape(groups, g.kg, m * g.p).transpose(0, 2, 1),
                  out=prods[i])
        np.add(sums[i], prods[i], out=sums[i])  # the chunks' products in chunk order

    g.run(part)
    total = sums[0]
    for s in sums[1:]:
        total += s
    return total.reshape(weight_shape)


def conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation, groups):
    g = _Conv(input_shape, weight.shape, stride, padding, dilation, groups, grad_output.dtype)
    go = np.ascontiguousarray(grad_output)
    w_t = np.ascontiguousarray(weight.reshape(groups, g.og, g.kg).transpose(0, 2, 1))
    out = np.empty(input_shape, dtype=g.dtype)

    def part(i, lo, hi, flat, rows):
        m = hi - lo
        if g.wide:
            rows = rows[:g.o * m * g.p].reshape(g.o, m, g.p)
            np.copyto(rows, go[lo:hi].reshape(m, g.o, g.p).transpose(1, 0, 2))
            np.matmul(w_t, rows.reshape(groups, g.og, m * g.p),
                      out=flat[:m * g.k * g.p].reshape(groups, g.kg, m * g.p))
        else:
            np.matmul(w_t, go[lo:hi].reshape(m, groups, g.og, g.p),
                      out=flat[:m * g.k * g.p].reshape(m, groups, g.kg, g.p))
        col2im(flat, out, lo, m, *g.strides(m), *g.args())

    g.run(part)
    return out
