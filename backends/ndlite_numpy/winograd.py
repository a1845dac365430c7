"""Winograd F(2x2, 3x3) convolution for the NumPy backend's compiled kernels (numba, optional).

A 3x3, stride-1 convolution computes each 2x2 tile of output from a 4x4 tile of input with 16
products per (output, input) channel pair instead of 36: the tiles are transformed (V = B^T d B),
the channels contracted by 16 BLAS products (M[xi] = U[xi] @ V[xi], U = G g G^T the transformed
weights), and the products transformed back (Y = A^T M A). That is 2.25x fewer multiply-adds in
the products, which are most of a convolution's time on a CPU whose BLAS runs AVX2 kernels
(docs/DESIGN.md). The input gradient of such a convolution is one too (the weights flipped and
transposed, padding 2 - p), so it takes the same path; the weight gradient uses the same
transforms through the chain rule (dL/dU = sum over tiles of (A dy A^T) * V).

Like kernels.py's convolution, each of the backend's threads takes a piece of the batch and
walks it in chunks of images whose transformed tiles fit in L2; the transforms are serial
`nogil` kernels, written in a fixed order: deterministic for a thread count. The arithmetic is
exact in real numbers; in floating point the transforms add a few roundings (float32 results
within ~1e-6 relative of im2col's, tested against the fallbacks in float64 to 1e-10).
"""

from __future__ import annotations

import numpy as np

from . import kernels, scratch
from . import threads as threads_

#: input and output channels from which the Winograd path runs (fewer: im2col's products are
#: small anyway, and the transforms cost more than they save)
MIN_CHANNELS = 16
#: planes (input and output) from which it runs: the seed CNN's 4x4 -> 2x2 convolution, one
#: tile an image, ran its input gradient in 7.6 ms a step against 6.3 by im2col
MIN_PLANE = 8

if kernels.numba is not None:
    _serial = kernels._serial

    @_serial
    def _tiles_in(x, n0, m_img, v, pad, th, tw):
        """v[c, xi, (image, ty, tx)] = (B^T d B)[xi] of the 4x4 input tile at (2ty - pad,
        2tx - pad) of channel c (zeros outside the image). A row of tiles at a time, from
        four zero-padded input rows, so that LLVM vectorizes along the row (views and
        range(0, ...) indices: see kernels.im2col). xi is not the outer axis: 16 rows of
        writes 32 KB apart thrashed L1's sets (4x slower)."""
        c_in, h, w = x.shape[1], x.shape[2], x.shape[3]
        rows = np.zeros((4, 2 * tw + 2), dtype=x.dtype)
        width = min(w, 2 * tw + 2 - pad)
        for m in range(m_img):
            for c in range(c_in):
                plane = x[n0 + m, c]
                for ty in range(th):
                    for a in range(4):
                        r, row = 2 * ty - pad + a, rows[a]
                        if 0 <= r < h:
                            src, dst = plane[r, :width], row[pad:pad + width]
                            for k in range(width):
                                dst[k] = src[k]
                        else:
                            row[:] = 0
                    base = (m * th + ty) * tw
                    out = v[c, :, base:base + tw]
                    r0, r1, r2, r3 = rows[0], rows[1], rows[2], rows[3]
                    for tx in range(tw):
                        k = 2 * tx
                        t0 = (r0[k] - r2[k], r0[k + 1] - r2[k + 1], r0[k + 2] - r2[k + 2],
                              r0[k + 3] - r2[k + 3])
                        t1 = (r1[k] + r2[k], r1[k + 1] + r2[k + 1], r1[k + 2] + r2[k + 2],
                              r1[k + 3] + r2[k + 3])
                        t2 = (r2[k] - r1[k], r2[k + 1] - r1[k + 1], r2[k + 2] - r1[k + 2],
                              r2[k + 3] - r1[k + 3])
                        t3 = (r1[k] - r3[k], r1[k + 1] - r3[k + 1], r1[k + 2] - r3[k + 2],
                              r1[k + 3] - r3[k + 3])
                        for i, t in enumerate((t0, t1, t2, t3)):
                            out[4 * i, tx] = t[0] - t[2]
                            out[4 * i + 1, tx] = t[1] + t[2]
                            out[4 * i + 2, tx] = t[2] - t[1]
                            out[4 * i + 3, tx] = t[1] - t[3]

    @_serial
    def _tiles_out(prod, out, n0, m_img, th, tw):
        """out[n0 + m, o] tile (ty, tx) = A^T M A of prod[o, :, (m, ty, tx)] (the 2x2 tile's
        part inside the output), a row of tiles at a time."""
        o_all, oh, ow = out.shape[1], out.shape[2], out.shape[3]
        rows = np.empty((2, 2 * tw), dtype=out.dtype)
        for m in range(m_img):
            for o in range(o_all):
                plane = out[n0 + m, o]
                for ty in range(th):
                    base = (m * th + ty) * tw
                    p = prod[o, :, base:base + tw]
                    y0, y1 = rows[0], rows[1]
                    for tx in range(tw):
                        s0 = (p[0, tx] + p[4, tx] + p[8, tx], p[1, tx] + p[5, tx] + p[9, tx],
                              p[2, tx] + p[6, tx] + p[10, tx], p[3, tx] + p[7, tx] + p[11, tx])
                        s1 = (p[4, tx] - p[8, tx] - p[12, tx], p[5, tx] - p[9, tx] - p[13, tx],
                              p[6, tx] - p[10, tx] - p[14, tx], p[7, tx] - p[11, tx] - p[15, tx])
                        y0[2 * tx] = s0[0] + s0[1] + s0[2]
                        y0[2 * tx + 1] = s0[1] - s0[2] - s0[3]
                        y1[2 * tx] = s1[0] + s1[1] + s1[2]
                        y1[2 * tx + 1] = s1[1] - s1[2] - s1[3]
                    for a in range(min(2, oh - 2 * ty)):
                        src, dst = rows[a], plane[2 * ty + a]
                        for k in range(ow):
                            dst[k] = src[k]


    @_serial
    def _grad_tiles(grad_output, n0, m_img, dm, th, tw):
        """dm[o, xi, (image, ty, tx)] = (A dy A^T)[xi] of the 2x2 tile (ty, tx) of the output
        gradient (zeros past its edge): the gradient of the tile's M in the forward."""
        oh, ow = grad_output.shape[2], grad_output.shape[3]
        rows = np.zeros((2, 2 * tw), dtype=grad_output.dtype)
        for m in range(m_img):
            for o in range(grad_output.shape[1]):
                plane = grad_output[n0 + m, o]
                for ty in range(th):
                    for a in range(2):
                        row = rows[a]
                        if 2 * ty + a < oh:
                            src = plane[2 * ty + a]
                            for k in range(ow):
                                row[k] = src[k]
                        else:
                            row[:] = 0
                    base = (m * th + ty) * tw
                    out, y0, y1 = dm[o, :, base:base + tw], rows[0], rows[1]
                    for tx in range(tw):
                        p0, q0 = y0[2 * tx], y0[2 * tx + 1]
                        p1, q1 = y1[2 * tx], y1[2 * tx + 1]
                        # rows of A dy: dy0, dy0 + dy1, dy0 - dy1, -dy1; then each [p, q]
                        # times A^T: p, p + q, p - q, -q
                        for i, (p, q) in enumerate(((p0, q0), (p0 + p1, q0 + q1),
                                                    (p0 - p1, q0 - q1), (-p1, -q1))):
                            out[4 * i, tx] = p
                            out[4 * i + 1, tx] = p + q
                            out[4 * i + 2, tx] = p - q
                            out[4 * i + 3, tx] = -q


_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def applies(x_shape, weight_shape, stride, padding, dilation, groups) -> bool:
    """3x3, stride 1, no dilation, one group, padding at most 2, channels and planes enough
    (the input and output planes, so that the input gradient qualifies alike)."""
    o, c, kh, kw = weight_shape
    return (kernels.numba is not None and (kh, kw) == (3, 3) and tuple(stride) == (1, 1)
            and tuple(dilation) == (1, 1) and groups == 1 and padding[0] == padding[1] <= 2
            and min(o, c) >= MIN_CHANNELS and min(x_shape[2:]) >= MIN_PLANE
            and min(x_shape[2:]) + 2 * padding[0] - 2 >= MIN_PLANE)


def _chunks(dtype, n, c, o, th, tw):
    """Images a chunk, the pieces of the batch, and per piece the flat scratch of a chunk's
    transformed input tiles (C, 16, tiles) and products (O, 16, tiles)."""
    per_image = 16 * max(c, o) * th * tw * dtype.itemsize
    chunk = max(1, min(n, kernels.CHUNK_BYTES // per_image))
    pieces = threads_.plan(n, 16 * n * o * c * th * tw)
    vs = [scratch.buffer(("wino_v", i), (16 * c * chunk * th * tw,), dtype)
          for i in range(len(pieces))]
    ms = [scratch.buffer(("wino_m", i), (16 * o * chunk * th * tw,), dtype)
          for i in range(len(pieces))]
    return chunk, pieces, vs, ms


def conv2d(x, weight, pad: int):
    """conv2d(x, weight, stride 1, padding pad) for 3x3 weights, by Winograd F(2x2, 3x3)."""
    x = np.ascontiguousarray(x)
    (n, c, h, w), o = x.shape, weight.shape[0]
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    # U = G g G^T for every (o, c), as (16, O, C); in float64, rounded once
    with threads_.blas_held():  # (OpenBLAS would thread these and spin after: threads.py)
        u = np.tensordot(np.tensordot(_G, weight.astype(np.float64), ([1], [2])), _G,
                         ([3], [1]))
    u = np.ascontiguousarray(u.transpose(0, 3, 1, 2).reshape(16, o, c).astype(x.dtype))
    out = np.empty((n, o, oh, ow), dtype=x.dtype)
    chunk, pieces, vs, ms = _chunks(x.dtype, n, c, o, th, tw)

    def piece(i, lo, hi):
        for a in range(lo, hi, chunk):
            m = min(hi, a + chunk) - a
            v = vs[i][:16 * c * m * th * tw].reshape(c, 16, m * th * tw)
            prod = ms[i][:16 * o * m * th * tw].reshape(o, 16, m * th * tw)
            _tiles_in(x, a, m, v, pad, th, tw)
            np.matmul(u, v.transpose(1, 0, 2), out=prod.transpose(1, 0, 2))
            _tiles_out(prod, out, a, m, th, tw)

    threads_.run(piece, [(i, *p) for i, p in enumerate(pieces)])
    return out


def conv2d_grad_input(grad_output, weight, pad: int):
    """The input gradient of conv2d(x, weight, padding pad): the same convolution of the
    output gradient with the weights flipped and transposed, padding 2 - pad."""
    flipped = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    return conv2d(grad_output, flipped, 2 - pad)


def conv2d_grad_weight(x, grad_output, pad: int):
    """The weight gradient of conv2d(x, weight, padding pad), 3x3, by the same transforms:
    with M = U * V per tile and U = G g G^T, dL/dU is the sum over tiles of (A dy A^T) * V
    (16 products over the tiles, per chunk, summed in chunk then piece order), and the
    gradient G^T (dL/dU) G."""
    x, go = np.ascontiguousarray(x), np.ascontiguousarray(grad_output)
    (n, c, _, _), (o, oh, ow) = x.shape, go.shape[1:]
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    chunk, pieces, vs, ms = _chunks(x.dtype, n, c, o, th, tw)
    sums = [np.zeros((16, o, c), dtype=x.dtype) for _ in pieces]
    prods = [scratch.buffer(("wino_du", i), (16, o, c), x.dtype) for i in range(len(pieces))]

    def piece(i, lo, hi):
        for a in range(lo, hi, chunk):
            m = min(hi, a + chunk) - a
            v = vs[i][:16 * c * m * th * tw].reshape(c, 16, m * th * tw)
            dm = ms[i][:16 * o * m * th * tw].reshape(o, 16, m * th * tw)
            _tiles_in(x, a, m, v, pad, th, tw)
            _grad_tiles(go, a, m, dm, th, tw)
            np.matmul(dm.transpose(1, 0, 2), v.transpose(1, 2, 0), out=prods[i])
            np.add(sums[i], prods[i], out=sums[i])

    threads_.run(piece, [(i, *p) for i, p in enumerate(pieces)])
    total = sums[0].astype(np.float64)
    for s in sums[1:]:
        total += s
    with threads_.blas_held():
        grad = np.tensordot(np.tensordot(total.reshape(4, 4, o, c), _G, ([0], [0])), _G,
                            ([0], [0]))  # (O, C, i, j)
    return grad.astype(x.dtype)
