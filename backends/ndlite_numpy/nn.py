"""NumPy fast paths for the neural-network ops of the device contract (protocol.py).

Convolution is im2col (a strided view of every window, copied once into a matrix) and one
BLAS matmul. NumPy copies and adds fast only along long contiguous runs, so two layouts:
- "per image" (N, C*kh*kw, OH*OW), one matmul per image writing NCHW directly: used when
  output rows are long (OW >= WIDE_ROWS: the early layers of a CNN);
- "batch innermost": the input transposed to (C, H, W, N), so every window row is a long
  contiguous run (OW * N values); one matmul per kernel row for the whole batch (its columns
  still in cache), the products summed, then the output transposed back. col2im adds each
  kernel offset's columns into a strided view of the padded (C, H, W, N) gradient: kh*kw long
  vectorized adds in a fixed order, deterministic.
Non-overlapping max pooling (kernel == stride, the common case) copies the input once into
kh*kw contiguous planes (one per window offset) and compares them in row-major order; other
geometries use the fallbacks.

Every op cuts its batch into pieces, one per thread (threads.py), and runs each piece through
the same code with single-threaded BLAS. The caller allocates every buffer a piece writes to
and the piece fills it through `out=`; one piece (one thread, or a small op) is the plain
single-threaded computation. A weight gradient is the sum of the pieces' partial sums, in piece
order.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ndlite.device import fallbacks

from . import kernels, onednn, pooling, scratch, threads, winograd

#: output width from which the per-image layout beats the batch-innermost one
WIDE_ROWS = 16


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _per_image(out_width: int) -> bool:
    return out_width >= WIDE_ROWS


class _Geometry:
    """Sizes of one convolution, and the buffers of its pieces (allocated by the caller)."""

    def __init__(self, input_shape, weight_shape, stride, padding, dilation, groups, dtype):
        (self.n, self.c, self.h, self.w), (self.o, self.cg, self.kh, self.kw) = \
            input_shape, weight_shape
        (self.sh, self.sw), (self.ph, self.pw), (self.dh, self.dw) = stride, padding, dilation
        self.groups, self.og, self.dtype = groups, self.o // groups, dtype
        self.oh = _out_size(self.h, self.kh, self.sh, self.ph, self.dh)
        self.ow = _out_size(self.w, self.kw, self.sw, self.pw, self.dw)
        self.k = self.cg * self.kh * self.kw  # rows of a group's columns
        self.pieces = threads.plan(self.n, self.n * self.o * self.oh * self.ow * self.k)

    def buffers(self, tag: str, shape_of, zeroed=False) -> list:
        """One scratch buffer per piece, shape_of(m) for a piece of m images."""
        return [scratch.buffer((tag, i), shape_of(hi - lo), self.dtype, zeroed=zeroed)
                for i, (lo, hi) in enumerate(self.pieces)]

    def run(self, part, *buffers) -> list:
        return threads.run(lambda i, lo, hi: part(lo, hi, *(b[i] for b in buffers)),
                           [(i, *p) for i, p in enumerate(self.pieces)])

    @property
    def padded(self) -> bool:
        return bool(self.ph or self.pw)


# ---- per-image layout: columns (m, G, Cg*kh*kw, OH*OW) ----------------------------------------


def _per_image_shape(g: _Geometry, m: int) -> tuple:
    return (m, g.c, g.kh, g.kw, g.oh, g.ow)


def _fill_cols_per_image(g: _Geometry, x, xp, cols):
    """Copy every window of the images x (m, C, H, W) into cols; xp holds the padded input."""
    if xp is not None:
        xp[:, :, g.ph:g.ph + g.h, g.pw:g.pw + g.w] = x
        x = xp
    s_n, s_c, s_h, s_w = x.strides
    win = as_strided(x, cols.shape, (s_n, s_c, s_h * g.dh, s_w * g.dw, s_h * g.sh, s_w * g.sw),
                     writeable=False)
    np.copyto(cols, win)
    return cols.reshape(cols.shape[0], g.groups, g.k, g.oh * g.ow)


def _padded_per_image(g: _Geometry):
    if not g.padded:
        return [None] * len(g.pieces)
    # the padding is in the tag: the border must have stayed zero, so only calls that write the
    # same interior may share the buffer
    return g.buffers(("padded", g.ph, g.pw), lambda m: (m, g.c, g.h + 2 * g.ph, g.w + 2 * g.pw),
                     zeroed=True)


# ---- batch-innermost layout: one kernel row's columns (G, Cg*kw, OH*OW*m) at a time -----------
# (a kernel row's columns fit in cache: the matmul reads them right after they are written)


def _fill_inner(g: _Geometry, x, xp):
    """The images x (m, C, H, W) padded and transposed to xp (C, H, W, m) in one copy."""
    xp[:, g.ph:g.ph + g.h, g.pw:g.pw + g.w, :] = x.transpose(1, 2, 3, 0)


def _fill_row(g: _Geometry, xp, i: int, cols):
    """Copy the windows' kernel row i into cols (C, kw, OH, OW, m); returned as (G, Cg*kw, L)."""
    s_c, s_h, s_w, s_n = xp.strides
    win = as_strided(xp[:, i * g.dh:], cols.shape,
                     (s_c, s_w * g.dw, s_h * g.sh, s_w * g.sw, s_n), writeable=False)
    np.copyto(cols, win)
    return cols.reshape(g.groups, g.cg * g.kw, -1)


def _inner_buffers(g: _Geometry):
    # (the padding in the tag: see _padded_per_image)
    xp = g.buffers(("inner", g.ph, g.pw), lambda m: (g.c, g.h + 2 * g.ph, g.w + 2 * g.pw, m),
                   zeroed=True)
    cols = g.buffers("row", lambda m: (g.c, g.kw, g.oh, g.ow, m))
    return xp, cols


def _weight_rows(g: _Geometry, weight):
    """weight (O, Cg, kh, kw) as (kh, G, O/G, Cg*kw): the weights of each kernel row."""
    w = weight.reshape(g.groups, g.og, g.cg, g.kh, g.kw).transpose(3, 0, 1, 2, 4)
    return np.ascontiguousarray(w).reshape(g.kh, g.groups, g.og, g.cg * g.kw)


def _fill_grad_batch_inner(g: _Geometry, grad_output, out):
    """grad_output (m, O, OH, OW) copied into out (O, OH, OW, m); returned as (G, O/G, L)."""
    np.copyto(out, grad_output.transpose(1, 2, 3, 0))
    return out.reshape(g.groups, g.og, -1)


# ---- the fast paths ---------------------------------------------------------------------------


def conv2d(x, weight, stride, padding, dilation, groups):
    out = onednn.conv2d(x, weight, stride, padding, dilation, groups)  # float32, if installed
    if out is not None:
        return out
    if kernels.applies(x, weight) and \
            winograd.applies(x.shape, weight.shape, stride, padding, dilation, groups):
        return winograd.conv2d(x, weight, padding[0])
    if _kernels_take(x.shape, weight.shape, stride, padding, dilation, x, weight):
        return kernels.conv2d(x, weight, stride, padding, dilation, groups)
    g = _Geometry(x.shape, weight.shape, stride, padding, dilation, groups,
                  np.result_type(x, weight))
    out = np.empty((g.n, g.o, g.oh, g.ow), dtype=g.dtype)
    if _per_image(g.ow):
        w = weight.reshape(groups, g.og, g.k)

        def part(lo, hi, xp, cols):
            cols = _fill_cols_per_image(g, x[lo:hi], xp, cols)
            np.matmul(w, cols, out=out[lo:hi].reshape(hi - lo, groups, g.og, g.oh * g.ow))

        g.run(part, _padded_per_image(g), g.buffers("cols", partial(_per_image_shape, g)))
        return out
    w = _weight_rows(g, weight)

    def part(lo, hi, xp, cols, prod, term):
        _fill_inner(g, x[lo:hi], xp)
        for i in range(g.kh):  # the sum over kernel rows of their products
            np.matmul(w[i], _fill_row(g, xp, i, cols), out=term if i else prod)
            if i:
                np.add(prod, term, out=prod)
        out[lo:hi] = prod.reshape(g.o, g.oh, g.ow, hi - lo).transpose(3, 0, 1, 2)

    products = partial(_product_shape, g)
    g.run(part, *_inner_buffers(g), g.buffers("prod", products), g.buffers("term", products))
    return out


def _kernels_take(input_shape, weight_shape, stride, padding, dilation, *arrays) -> bool:
    """Whether kernels.py's chunked convolution runs: compiled kernels on, and output rows at
    least WIDE_ROWS wide. Narrower ones stay on the batch-innermost layout here, whose window
    rows are OW * N long: per image, a row of 8 costs the kernels more than its copy (seed CNN
    conv2, 8x8 outputs, 2 threads: 5.7 ms against 5.0 forward)."""
    return kernels.applies(*arrays) and _per_image(
        _out_size(input_shape[3], weight_shape[3], stride[1], padding[1], dilation[1]))


def _product_shape(g: _Geometry, m: int) -> tuple:
    return (g.groups, g.og, g.oh * g.ow * m)


def conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation, groups):
    out = onednn.conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation,
                                    groups)
    if out is not None:
        return out
    if kernels.applies(x, grad_output) and \
            winograd.applies(x.shape, weight_shape, stride, padding, dilation, groups):
        return winograd.conv2d_grad_weight(x, grad_output, padding[0])
    if _kernels_take(x.shape, weight_shape, stride, padding, dilation, x, grad_output):
        return kernels.conv2d_grad_weight(x, grad_output, weight_shape, stride, padding,
                                          dilation, groups)
    g = _Geometry(x.shape, weight_shape, stride, padding, dilation, groups,
                  np.result_type(x, grad_output))
    sums = [np.empty((groups, g.og, g.cg, g.kh, g.kw), dtype=g.dtype) for _ in g.pieces]
    if _per_image(g.ow):
        def part(lo, hi, xp, cols, prod, total):
            cols = _fill_cols_per_image(g, x[lo:hi], xp, cols)
            go = grad_output[lo:hi].reshape(hi - lo, groups, g.og, g.oh * g.ow)
            # one matmul per image, summed: cheaper than copying the columns into one matrix
            np.matmul(go, cols.transpose(0, 1, 3, 2), out=prod)
            np.add.reduce(prod, axis=0, out=total.reshape(groups, g.og, g.k))

        g.run(part, _padded_per_image(g), g.buffers("cols", partial(_per_image_shape, g)),
              g.buffers("prod", lambda m: (m, groups, g.og, g.k)), sums)
    else:
        def part(lo, hi, xp, cols, go, row, total):
            _fill_inner(g, x[lo:hi], xp)
            go = _fill_grad_batch_inner(g, grad_output[lo:hi], go)
            for i in range(g.kh):  # kernel row i of the weight gradient
                np.matmul(go, _fill_row(g, xp, i, cols).transpose(0, 2, 1), out=row)
                total[:, :, :, i] = row.reshape(groups, g.og, g.cg, g.kw)

        g.run(part, *_inner_buffers(g), g.buffers("grad", lambda m: (g.o, g.oh, g.ow, m)),
              [np.empty((groups, g.og, g.cg * g.kw), dtype=g.dtype) for _ in g.pieces], sums)
    total = sums[0]
    for s in sums[1:]:
        total += s
    return total.reshape(weight_shape)


def conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation, groups):
    out = onednn.conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation,
                                   groups)
    if out is not None:
        return out
    if kernels.applies(grad_output, weight) and \
            winograd.applies(input_shape, weight.shape, stride, padding, dilation, groups):
        return winograd.conv2d_grad_input(grad_output, weight, padding[0])
    if _kernels_take(input_shape, weight.shape, stride, padding, dilation, grad_output, weight):
        return kernels.conv2d_grad_input(grad_output, weight, input_shape, stride, padding,
                                         dilation, groups)
    g = _Geometry(input_shape, weight.shape, stride, padding, dilation, groups,
                  np.result_type(grad_output, weight))
    hp, wp = g.h + 2 * g.ph, g.w + 2 * g.pw
    # columns ordered (kernel row, kernel column, channel) so that each offset is one slice;
    # one kernel row at a time, so that its columns are still in cache when col2im adds them
    w_t = weight.reshape(groups, g.og, g.cg, g.kh, g.kw).transpose(3, 0, 4, 2, 1)
    w_t = np.ascontiguousarray(w_t).reshape(g.kh, groups, g.kw * g.cg, g.og)
    out = np.empty(input_shape, dtype=g.dtype)

    def part(lo, hi, go, cols, grad):
        m = hi - lo
        go = _fill_grad_batch_inner(g, grad_output[lo:hi], go)
        grad.fill(0)
        for i in range(g.kh):
            np.matmul(w_t[i], go, out=cols)
            row = cols.reshape(groups, g.kw, g.cg, g.oh, g.ow, m)
            for j in range(g.kw):
                r, q = i * g.dh, j * g.dw
                view = grad[:, :, r:r + g.sh * (g.oh - 1) + 1:g.sh,
                            q:q + g.sw * (g.ow - 1) + 1:g.sw]
                np.add(view, row[:, j], out=view)
        grad = grad.reshape(g.c, hp, wp, m)[:, g.ph:g.ph + g.h, g.pw:g.pw + g.w]
        out[lo:hi] = grad.transpose(3, 0, 1, 2)

    g.run(part, g.buffers("grad", lambda m: (g.o, g.oh, g.ow, m)),
          g.buffers("row", lambda m: (groups, g.kw * g.cg, g.oh * g.ow * m)),
          g.buffers("col2im", lambda m: (groups, g.cg, hp, wp, m)))
    return out


# ---- pooling ----------------------------------------------------------------------------------


def _tiles(shape, kernel_size, stride, padding, dilation, ceil_mode):
    """(OH, OW) when the windows tile the input without overlap or padding, else None."""
    if tuple(kernel_size) != tuple(stride) or any(padding) or tuple(dilation) != (1, 1) or \
            max(kernel_size) > 127:  # window offsets are int8
        return None
    out = tuple(fallbacks.pool_output_size(size, k, k, 0, 1, ceil_mode)
                for size, k in zip(shape[2:], kernel_size, strict=True))
    if any(o * k > size for o, k, size in zip(out, kernel_size, shape[2:], strict=True)):
        return None  # ceil_mode's last window hangs over the edge
    return out


def _pool_pieces(shape):
    return threads.plan(shape[0], 16 * int(np.prod(shape)))  # ~16 passes over the input


def _each(pieces, tag, shape_of, dtype):
    return [scratch.buffer((tag, i), shape_of(hi - lo), dtype) for i, (lo, hi) in enumerate(pieces)]


def _pick(index, value, better, step):
    """index = index + better * (value - index), in place (int8; step is scratch)."""
    np.subtract(np.int8(value), index, out=step)
    np.multiply(better, step, out=step)
    np.add(index, step, out=index)


def max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode):
    out = _tiles(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    if out is None:
        return None
    if kernels.applies(x):
        return pooling.max_pool2d(x, kernel_size, out)
    n, c, _, w = x.shape
    (oh, ow), (kh, kw) = out, kernel_size
    values = np.empty((n, c, oh, ow), dtype=x.dtype)
    indices = np.empty((n, c, oh, ow), dtype=np.int64)
    base = (np.arange(oh)[:, None] * kh) * w + np.arange(ow)[None, :] * kw
    pieces = _pool_pieces(x.shape)

    def part(i, lo, hi):
        m = hi - lo
        planes, small = planes_[i], small_[i]
        # NumPy compares strided float32 views ~7x slower than contiguous ones, so first one
        # copy into kh*kw contiguous planes: plane (i, j) holds offset (i, j) of every window
        windows = x[lo:hi, :, :oh * kh, :ow * kw].reshape(m, c, oh, kh, ow, kw)
        np.copyto(planes, windows.transpose(3, 5, 0, 1, 2, 4))
        # np.where is slow: the winner's row and column are updated with 0/1 int8 arithmetic
        # (pick = old + better * (new - old)); offsets are visited in row-major order and the
        # comparison is strict, so a tie keeps the first maximum, as in the reference
        best = values[lo:hi]
        np.copyto(best, planes[0, 0])
        row, col, better, step = small
        row.fill(0)
        col.fill(0)
        for a in range(kh):
            for b in range(kw):
                if a == b == 0:
                    continue
                np.greater(planes[a, b], best, out=better.view(np.bool_))
                # a NaN always wins (the last one: PyTorch's index), and stays the value
                np.logical_or(better.view(np.bool_), np.isnan(planes[a, b]),
                              out=better.view(np.bool_))
                if a:  # (row 0 needs no update: every earlier offset was in row 0 too)
                    _pick(row, a, better, step)
                _pick(col, b, better, step)
                np.maximum(best, planes[a, b], out=best)
        idx = indices[lo:hi]
        np.copyto(idx, row)
        idx *= w
        idx += col
        idx += base

    planes_ = _each(pieces, "planes", lambda m: (kh, kw, m, c, oh, ow), x.dtype)
    small_ = _each(pieces, "pool", lambda m: (4, m, c, oh, ow), np.int8)
    threads.run(part, [(i, *p) for i, p in enumerate(pieces)])
    return values, indices


def max_pool2d_grad(grad_output, indices, input_shape, kernel_size, stride, padding, dilation,
                    ceil_mode):
    out = _tiles(input_shape, kernel_size, stride, padding, dilation, ceil_mode)
    if out is None:
        return None
    if kernels.applies(grad_output) and indices.dtype == np.int64:
        return pooling.max_pool2d_grad(grad_output, indices, input_shape, kernel_size, out)
    n, c, h, w = input_shape
    (oh, ow), (kh, kw) = out, kernel_size
    base = (np.arange(oh)[:, None] * kh) * w + np.arange(ow)[None, :] * kw
    tiled = (oh * kh, ow * kw) == (h, w)
    grad = (np.empty if tiled else np.zeros)(input_shape, dtype=grad_output.dtype)
    pieces = _pool_pieces(input_shape)

    def part(i, lo, hi):
        # each input element lies in at most one window: it gets that window's gradient if it
        # won
        offset, won = offsets[i], masks[i]
        np.subtract(indices[lo:hi], base, out=offset)
        for a in range(kh):
            for b in range(kw):
                np.equal(offset, a * w + b, out=won)
                np.multiply(grad_output[lo:hi], won,
                            out=grad[lo:hi, :, a:oh * kh:kh, b:ow * kw:kw])

    offsets = _each(pieces, "offsets", lambda m: (m, c, oh, ow), np.int64)
    masks = _each(pieces, "won", lambda m: (m, c, oh, ow), np.bool_)
    threads.run(part, [(i, *p) for i, p in enumerate(pieces)])
    return grad
