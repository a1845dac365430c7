"""NumPy fast paths for the neural-network ops of the device contract (protocol.py).

Convolution is im2col through `as_strided` (a view of every window, copied once into a
matrix) and one BLAS matmul. Two layouts, picked by the output's size:
- "per image" (N, C*kh*kw, OH*OW): one matmul per image writes NCHW directly; best when
  each image has many output positions (the early layers of a CNN);
- "flat" (N*OH*OW, C*kh*kw): one large matmul for the whole batch; best when the images are
  small and a per-image matmul would be tiny (late layers).
col2im adds each kernel offset's columns into a strided view of the padded result: kh*kw
vectorized adds in a fixed order, deterministic. Non-overlapping max pooling (the common
kernel == stride case) is a reshape plus one argmax; other geometries use the fallbacks.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ndlite.device import fallbacks

#: output positions per image from which the per-image layout beats one flat matmul
PER_IMAGE_MIN_POSITIONS = 32


def _pad(x, padding):
    ph, pw = padding
    if ph == pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def _windows(x, kernel_size, stride, padding, dilation):
    """A read-only view (N, C, kh, kw, OH, OW) of every window of the padded input."""
    xp = _pad(x, padding)
    n, c, h, w = xp.shape
    kh, kw = kernel_size
    (sh, sw), (dh, dw) = stride, dilation
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    s_n, s_c, s_h, s_w = xp.strides
    return as_strided(xp, (n, c, kh, kw, oh, ow),
                      (s_n, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw), writeable=False)


def _per_image(out_hw) -> bool:
    return out_hw[0] * out_hw[1] >= PER_IMAGE_MIN_POSITIONS


def conv2d(x, weight, stride, padding, dilation, groups):
    o, cg, kh, kw = weight.shape
    win = _windows(x, (kh, kw), stride, padding, dilation)
    n, _, _, _, oh, ow = win.shape
    og, k = o // groups, cg * kh * kw
    w = weight.reshape(groups, og, k)
    if _per_image((oh, ow)):
        cols = win.reshape(n, groups, k, oh * ow)
        return np.matmul(w, cols).reshape(n, o, oh, ow)
    # flat: rows are (n, oh, ow), columns (c, kh, kw) within each group
    cols = win.reshape(n, groups, cg, kh, kw, oh, ow).transpose(1, 0, 5, 6, 2, 3, 4)
    cols = cols.reshape(groups, n * oh * ow, k)
    out = np.matmul(cols, w.transpose(0, 2, 1))  # (G, N*OH*OW, O/G)
    out = out.reshape(groups, n, oh, ow, og).transpose(1, 0, 4, 2, 3)
    return np.ascontiguousarray(out).reshape(n, o, oh, ow)


def _col2im(cols, input_shape, stride, padding, dilation):
    """cols (N, C, kh, kw, OH, OW), any strides, summed into (N, C, H, W)."""
    n, c, kh, kw, oh, ow = cols.shape
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    h, w = input_shape[2], input_shape[3]
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            r, q = i * dh, j * dw
            out[:, :, r:r + sh * (oh - 1) + 1:sh, q:q + sw * (ow - 1) + 1:sw] += cols[:, :, i, j]
    return out[:, :, ph:ph + h, pw:pw + w]


def conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight.shape
    n, _, oh, ow = grad_output.shape
    og, k = o // groups, cg * kh * kw
    w = weight.reshape(groups, og, k)
    if _per_image((oh, ow)):
        g = grad_output.reshape(n, groups, og, oh * ow)
        cols = np.matmul(w.transpose(0, 2, 1), g)  # (N, G, K, OH*OW)
        cols = cols.reshape(n, groups * cg, kh, kw, oh, ow)
    else:
        g = grad_output.reshape(n, groups, og, oh * ow).transpose(1, 0, 3, 2)
        cols = np.matmul(g.reshape(groups, n * oh * ow, og), w)  # (G, N*OH*OW, K)
        cols = cols.reshape(groups, n, oh, ow, cg, kh, kw).transpose(1, 0, 4, 5, 6, 2, 3)
        cols = cols.reshape(n, groups * cg, kh, kw, oh, ow)
    return _col2im(cols, input_shape, stride, padding, dilation)


def conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight_shape
    win = _windows(x, (kh, kw), stride, padding, dilation)
    n, _, _, _, oh, ow = win.shape
    og, k = o // groups, cg * kh * kw
    if _per_image((oh, ow)):
        cols = win.reshape(n, groups, k, oh * ow)
        g = grad_output.reshape(n, groups, og, oh * ow)
        # (G, O/G, N*P) @ (G, N*P, K) would copy the columns; one matmul per image is cheaper
        per_image = np.matmul(g, cols.transpose(0, 1, 3, 2))
        return per_image.sum(axis=0).reshape(weight_shape)
    cols = win.reshape(n, groups, cg, kh, kw, oh, ow).transpose(1, 0, 5, 6, 2, 3, 4)
    cols = cols.reshape(groups, n * oh * ow, k)
    g = grad_output.reshape(n, groups, og, oh, ow).transpose(1, 2, 0, 3, 4)
    g = g.reshape(groups, og, n * oh * ow)
    return np.matmul(g, cols).reshape(weight_shape)


# ---- pooling ----------------------------------------------------------------------------------


def _tiles(shape, kernel_size, stride, padding, dilation, ceil_mode):
    """(OH, OW) when the windows tile the input without overlap or padding, else None."""
    if tuple(kernel_size) != tuple(stride) or any(padding) or tuple(dilation) != (1, 1):
        return None
    out = tuple(fallbacks.pool_output_size(size, k, k, 0, 1, ceil_mode)
                for size, k in zip(shape[2:], kernel_size))
    if any(o * k > size for o, k, size in zip(out, kernel_size, shape[2:])):
        return None  # ceil_mode's last window hangs over the edge
    return out


def max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode):
    out = _tiles(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    if out is None:
        return None
    n, c, h, w = x.shape
    (oh, ow), (kh, kw) = out, kernel_size
    tiles = x[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw)
    flat = tiles.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, kh * kw)
    local = flat.argmax(axis=-1)  # the first maximum in row-major order of the window
    values = np.take_along_axis(flat, local[..., None], axis=-1)[..., 0]
    rows = np.arange(oh)[:, None] * kh + local // kw
    cols = np.arange(ow)[None, :] * kw + local % kw
    return values, (rows * w + cols).astype(np.int64)


def max_pool2d_grad(grad_output, indices, input_shape, kernel_size, stride, padding, dilation,
                    ceil_mode):
    out = _tiles(input_shape, kernel_size, stride, padding, dilation, ceil_mode)
    if out is None:
        return None
    n, c, h, w = input_shape
    (oh, ow), (kh, kw) = out, kernel_size
    # each input element lies in at most one window: write its gradient where it won
    local = (indices // w - np.arange(oh)[:, None] * kh) * kw + \
        (indices % w - np.arange(ow)[None, :] * kw)
    flat = np.zeros((n, c, oh, ow, kh * kw), dtype=grad_output.dtype)
    np.put_along_axis(flat, local[..., None], grad_output[..., None], axis=-1)
    grad = flat.reshape(n, c, oh, ow, kh, kw).transpose(0, 1, 2, 4, 3, 5)
    grad = grad.reshape(n, c, oh * kh, ow * kw)
    if (oh * kh, ow * kw) != (h, w):
        grad = np.pad(grad, ((0, 0), (0, 0), (0, h - oh * kh), (0, w - ow * kw)))
    return grad
