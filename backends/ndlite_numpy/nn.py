"""NumPy fast paths for the neural-network ops of the device contract (protocol.py).

Convolution is im2col (a strided view of every window, copied once into a matrix) and one
BLAS matmul. NumPy copies and adds fast only along long contiguous runs, so two layouts:
- "per image" (N, C*kh*kw, OH*OW), one matmul per image writing NCHW directly: used when
  output rows are long (OW >= WIDE_ROWS: the early layers of a CNN);
- "batch innermost": the input transposed to (C, H, W, N), so every window row is a long
  contiguous run (OW * N values); one big matmul for the whole batch, then the output is
  transposed back. col2im adds each kernel offset's columns into a strided view of the
  padded (C, H, W, N) gradient: kh*kw long vectorized adds in a fixed order, deterministic.
Non-overlapping max pooling (kernel == stride, the common case) copies the input once into
kh*kw contiguous planes (one per window offset) and compares them in row-major order; other
geometries use the fallbacks.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ndlite.device import fallbacks

#: output width from which the per-image layout beats the batch-innermost one
WIDE_ROWS = 16


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _per_image(out_width: int) -> bool:
    return out_width >= WIDE_ROWS


# ---- per-image layout: cols (N, G, Cg*kh*kw, OH*OW) -------------------------------------------


def _windows_nchw(x, kernel_size, stride, padding, dilation):
    """A read-only view (N, C, kh, kw, OH, OW) of every window of the padded input."""
    ph, pw = padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    n, c, h, w = xp.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_size, stride, dilation
    oh, ow = _out_size(h, kh, sh, 0, dh), _out_size(w, kw, sw, 0, dw)
    s_n, s_c, s_h, s_w = xp.strides
    return as_strided(xp, (n, c, kh, kw, oh, ow),
                      (s_n, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw), writeable=False)


def _cols_per_image(x, kernel_size, stride, padding, dilation, groups):
    win = _windows_nchw(x, kernel_size, stride, padding, dilation)
    n, c, kh, kw, oh, ow = win.shape
    return win.reshape(n, groups, (c // groups) * kh * kw, oh * ow), (oh, ow)


# ---- batch-innermost layout: cols (G, Cg*kh*kw, OH*OW*N) --------------------------------------


def _cols_batch_inner(x, kernel_size, stride, padding, dilation, groups):
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    xp = np.zeros((c, h + 2 * ph, w + 2 * pw, n), dtype=x.dtype)
    xp[:, ph:ph + h, pw:pw + w, :] = x.transpose(1, 2, 3, 0)  # pad and transpose in one copy
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    s_c, s_h, s_w, s_n = xp.strides
    win = as_strided(xp, (c, kh, kw, oh, ow, n),
                     (s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw, s_n), writeable=False)
    return win.reshape(groups, (c // groups) * kh * kw, oh * ow * n), (oh, ow)


def _grad_batch_inner(grad_output, groups):
    """grad_output (N, O, OH, OW) as (G, O/G, OH*OW*N)."""
    n, o, oh, ow = grad_output.shape
    g = np.ascontiguousarray(grad_output.transpose(1, 2, 3, 0))
    return g.reshape(groups, o // groups, oh * ow * n)


# ---- the fast paths ---------------------------------------------------------------------------


def conv2d(x, weight, stride, padding, dilation, groups):
    o, cg, kh, kw = weight.shape
    n = x.shape[0]
    w = weight.reshape(groups, o // groups, cg * kh * kw)
    if _per_image(_out_size(x.shape[3], kw, stride[1], padding[1], dilation[1])):
        cols, (oh, ow) = _cols_per_image(x, (kh, kw), stride, padding, dilation, groups)
        return np.matmul(w, cols).reshape(n, o, oh, ow)
    cols, (oh, ow) = _cols_batch_inner(x, (kh, kw), stride, padding, dilation, groups)
    out = np.matmul(w, cols).reshape(o, oh, ow, n)
    return np.ascontiguousarray(out.transpose(3, 0, 1, 2))


def conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight_shape
    n, _, oh, ow = grad_output.shape
    if _per_image(ow):
        cols, _ = _cols_per_image(x, (kh, kw), stride, padding, dilation, groups)
        g = grad_output.reshape(n, groups, o // groups, oh * ow)
        # one matmul per image, summed: cheaper than copying the columns into one matrix
        return np.matmul(g, cols.transpose(0, 1, 3, 2)).sum(axis=0).reshape(weight_shape)
    cols, _ = _cols_batch_inner(x, (kh, kw), stride, padding, dilation, groups)
    g = _grad_batch_inner(grad_output, groups)
    return np.matmul(g, cols.transpose(0, 2, 1)).reshape(weight_shape)


def conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight.shape
    n, c, h, w = input_shape
    _, _, oh, ow = grad_output.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    # columns ordered (kernel row, kernel column, channel) so that each offset is one slice
    w_t = weight.reshape(groups, o // groups, cg, kh, kw).transpose(0, 3, 4, 2, 1)
    cols = np.matmul(w_t.reshape(groups, kh * kw * cg, o // groups),
                     _grad_batch_inner(grad_output, groups))
    cols = cols.reshape(groups, kh, kw, cg, oh, ow, n)
    grad = np.zeros((groups, cg, h + 2 * ph, w + 2 * pw, n), dtype=grad_output.dtype)
    for i in range(kh):
        for j in range(kw):
            r, q = i * dh, j * dw
            grad[:, :, r:r + sh * (oh - 1) + 1:sh, q:q + sw * (ow - 1) + 1:sw] += cols[:, i, j]
    grad = grad.reshape(c, h + 2 * ph, w + 2 * pw, n)[:, ph:ph + h, pw:pw + w]
    return np.ascontiguousarray(grad.transpose(3, 0, 1, 2))


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


def max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode):
    out = _tiles(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    if out is None:
        return None
    n, c, _, w = x.shape
    (oh, ow), (kh, kw) = out, kernel_size
    # NumPy compares strided float32 views ~7x slower than contiguous ones, so first one copy
    # into kh*kw contiguous planes: plane (i, j) holds offset (i, j) of every window
    windows = x[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw)
    planes = np.ascontiguousarray(windows.transpose(3, 5, 0, 1, 2, 4))
    # np.where is slow: the winner's row and column are updated with 0/1 int8 arithmetic
    # (pick = old + better * (new - old)); offsets are visited in row-major order and the
    # comparison is strict, so a tie keeps the first maximum, as in the reference
    values = planes[0, 0].copy()
    row, col = np.zeros(values.shape, dtype=np.int8), np.zeros(values.shape, dtype=np.int8)
    for i in range(kh):
        for j in range(kw):
            if i == j == 0:
                continue
            better = np.greater(planes[i, j], values).view(np.int8)
            if i:
                row += better * (np.int8(i) - row)
            col += better * (np.int8(j) - col)
            np.maximum(values, planes[i, j], out=values)
    indices = row.astype(np.int64)
    indices *= w
    indices += col
    indices += (np.arange(oh)[:, None] * kh) * w + np.arange(ow)[None, :] * kw
    return values, indices


def max_pool2d_grad(grad_output, indices, input_shape, kernel_size, stride, padding, dilation,
                    ceil_mode):
    out = _tiles(input_shape, kernel_size, stride, padding, dilation, ceil_mode)
    if out is None:
        return None
    n, c, h, w = input_shape
    (oh, ow), (kh, kw) = out, kernel_size
    # each input element lies in at most one window: it gets that window's gradient if it won
    offset = indices - ((np.arange(oh)[:, None] * kh) * w + np.arange(ow)[None, :] * kw)
    tiled = (oh * kh, ow * kw) == (h, w)
    grad = (np.empty if tiled else np.zeros)(input_shape, dtype=grad_output.dtype)
    for i in range(kh):
        for j in range(kw):
            np.multiply(grad_output, offset == i * w + j, out=grad[:, :, i:oh * kh:kh,
                                                                    j:ow * kw:kw])
    return grad
