"""Max pooling whose windows tile the input (kernel == stride, no padding or dilation), as
compiled kernels for the NumPy backend (numba, optional; see kernels.py): one pass that keeps
each window's maximum and the index of its winner, and one pass for the gradient that writes
every input element once. Branch-free selects along a row of windows, and 2x2 windows
unrolled, so that LLVM vectorizes them: a branchy loop ran 3x slower than the NumPy path
(nn.py), these 1.8-4.5x faster. The results are those of the reference bit for bit (ties keep
the first maximum, a NaN wins and the last NaN's index is kept, a tie of -0.0 and 0.0 keeps
the first, as PyTorch does).
"""

from __future__ import annotations

import numpy as np

from . import kernels, spread

if kernels.numba is not None:
    from numba import njit, prange

    _serial = kernels._serial

    @njit(inline="always")
    def _pick(v, offset, best, at):
        """One step of max pooling: np.maximum's value (a NaN stays), and the offset of the
        first maximum or of the last NaN, as the reference; branch-free."""
        better = (v > best) | (v != v)
        return (best if (best >= v) | (best != best) else v), (offset if better else at)

    @_serial
    def _max_pool_any(x, n0, n1, kh, kw, values, indices):
        """Windows kh x kw that tile the input: the maximum and its flat index."""
        h, w, c_in = x.shape[2], x.shape[3], x.shape[1]
        oh, ow = values.shape[2], values.shape[3]
        xf, vf, jf = x.reshape(-1), values.reshape(-1), indices.reshape(-1)
        for t in range(n0 * c_in, n1 * c_in):  # (image, channel) planes
            plane = xf[t * h * w:(t + 1) * h * w]
            for oy in range(oh):
                best = vf[(t * oh + oy) * ow:(t * oh + oy + 1) * ow]
                at = jf[(t * oh + oy) * ow:(t * oh + oy + 1) * ow]
                for q in range(ow):
                    value, offset = plane[oy * kh * w + q * kw], 0
                    for a in range(kh):
                        for b in range(kw):
                            value, offset = _pick(plane[(oy * kh + a) * w + q * kw + b],
                                                  a * w + b, value, offset)
                    best[q], at[q] = value, oy * kh * w + q * kw + offset

    @_serial
    def _max_pool_2x2(x, n0, n1, values, indices):
        """_max_pool_any for 2x2 windows, unrolled (twice as fast)."""
        h, w, c_in = x.shape[2], x.shape[3], x.shape[1]
        oh, ow = values.shape[2], values.shape[3]
        xf, vf, jf = x.reshape(-1), values.reshape(-1), indices.reshape(-1)
        for t in range(n0 * c_in, n1 * c_in):
            plane = xf[t * h * w:(t + 1) * h * w]
            for oy in range(oh):
                best = vf[(t * oh + oy) * ow:(t * oh + oy + 1) * ow]
                at = jf[(t * oh + oy) * ow:(t * oh + oy + 1) * ow]
                r0, r1 = plane[2 * oy * w:(2 * oy + 1) * w], plane[(2 * oy + 1) * w:]
                for q in range(ow):
                    value, offset = _pick(r0[2 * q + 1], 1, r0[2 * q], 0)
                    value, offset = _pick(r1[2 * q], w, value, offset)
                    value, offset = _pick(r1[2 * q + 1], w + 1, value, offset)
                    best[q], at[q] = value, 2 * oy * w + 2 * q + offset

    @kernels._jit
    def _max_pool_par(x, kh, kw, values, indices, n, parts):
        """The pooling kernels over `parts` pieces of images, one parallel launch."""
        for p in prange(parts):
            if kh == 2 and kw == 2:
                _max_pool_2x2(x, n * p // parts, n * (p + 1) // parts, values, indices)
            else:
                _max_pool_any(x, n * p // parts, n * (p + 1) // parts, kh, kw, values, indices)

    @kernels._jit
    def _max_pool_grad_par(grad_output, indices, kh, kw, grad, n, parts):
        for p in prange(parts):
            max_pool_grad(grad_output, indices, n * p // parts, n * (p + 1) // parts, kh, kw,
                          grad)

    @_serial
    def max_pool_grad(grad_output, indices, n0, n1, kh, kw, grad):
        """Every input element of a window gets the window's gradient if it won, else 0."""
        w = grad.shape[3]
        for n in range(n0, n1):
            for c in range(grad.shape[1]):
                for oy in range(grad_output.shape[2]):
                    for a in range(kh):
                        row = grad[n, c, oy * kh + a]
                        for ox in range(grad_output.shape[3]):
                            won = indices[n, c, oy, ox] - (oy * kh + a) * w - ox * kw
                            g = grad_output[n, c, oy, ox]
                            for b in range(kw):
                                row[ox * kw + b] = g if won == b else 0


def _max_pool_serial(x, kh, kw, values, indices, lo, hi):
    if (kh, kw) == (2, 2):
        _max_pool_2x2(x, lo, hi, values, indices)
    else:
        _max_pool_any(x, lo, hi, kh, kw, values, indices)


def _max_pool_grad_serial(grad_output, indices, kh, kw, grad, lo, hi):
    max_pool_grad(grad_output, indices, lo, hi, kh, kw, grad)


def max_pool2d(x, kernel_size, out_size):
    (kh, kw), (oh, ow) = kernel_size, out_size
    x = np.ascontiguousarray(x)
    n, c = x.shape[:2]
    values = np.empty((n, c, oh, ow), dtype=x.dtype)
    indices = np.empty((n, c, oh, ow), dtype=np.int64)

    spread.spread(n, x.size, _max_pool_serial, _max_pool_par, x, kh, kw, values, indices)
    return values, indices


def max_pool2d_grad(grad_output, indices, input_shape, kernel_size, out_size):
    (kh, kw), (oh, ow) = kernel_size, out_size
    go, idx = np.ascontiguousarray(grad_output), np.ascontiguousarray(indices)
    tiled = (oh * kh, ow * kw) == tuple(input_shape[2:])
    grad = (np.empty if tiled else np.zeros)(input_shape, dtype=go.dtype)
    spread.spread(input_shape[0], int(np.prod(input_shape)), _max_pool_grad_serial,
                    _max_pool_grad_par, go, idx, kh, kw, grad)
    return grad
