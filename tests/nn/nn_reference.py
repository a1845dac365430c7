"""Independent NumPy references for the NN ops: plain loops over output positions, written
from the definitions (PyTorch's documentation), sharing no code with ndlite."""

from __future__ import annotations

import math

import numpy as np


def out_size(size, k, s, p, d, ceil_mode=False):
    span = size + 2 * p - d * (k - 1) - 1
    if not ceil_mode:
        return span // s + 1
    out = math.ceil(span / s) + 1
    if (out - 1) * s >= size + p:
        out -= 1
    return out


def conv2d(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = out_size(wd, kw, stride[1], padding[1], dilation[1])
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                rows = i * stride[0] + dilation[0] * np.arange(kh)
                cols = j * stride[1] + dilation[1] * np.arange(kw)
                patch = xp[:, g * cg:(g + 1) * cg][:, :, rows][:, :, :, cols]
                out[:, oc, i, j] = np.sum(patch * w[oc], axis=(1, 2, 3))
    return out


def conv2d_grads(x, w, grad, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """(grad_input, grad_weight) by scattering each output's gradient over its window."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ph, pw = padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(grad.shape[2]):
            for j in range(grad.shape[3]):
                for p in range(kh):
                    for q in range(kw):
                        r = i * stride[0] + p * dilation[0]
                        s = j * stride[1] + q * dilation[1]
                        g_out = grad[:, oc, i, j, None]
                        gxp[:, g * cg:(g + 1) * cg, r, s] += g_out * w[oc, :, p, q]
                        gw[oc, :, p, q] += np.sum(g_out *
                                                  xp[:, g * cg:(g + 1) * cg, r, s], axis=0)
    return gxp[:, :, ph:ph + h, pw:pw + wd], gw


def max_pool2d(x, k, s, p, d=(1, 1), ceil_mode=False):
    """(values, flat-in-plane indices); ties go to the first maximum in row-major order."""
    n, c, h, w = x.shape
    oh = out_size(h, k[0], s[0], p[0], d[0], ceil_mode)
    ow = out_size(w, k[1], s[1], p[1], d[1], ceil_mode)
    values = np.full((n, c, oh, ow), -np.inf)
    index = np.zeros((n, c, oh, ow), dtype=np.int64)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
                    if 0 <= r < h and 0 <= q < w:
                        v = x[:, :, r, q]
                        better = v > values[:, :, i, j]
                        values[:, :, i, j] = np.where(better, v, values[:, :, i, j])
                        index[:, :, i, j] = np.where(better, r * w + q, index[:, :, i, j])
    return values, index


def avg_pool2d(x, k, s, p, ceil_mode=False, count_include_pad=True):
    n, c, h, w = x.shape
    oh = out_size(h, k[0], s[0], p[0], 1, ceil_mode)
    ow = out_size(w, k[1], s[1], p[1], 1, ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, q0 = i * s[0] - p[0], j * s[1] - p[1]
            r1, q1 = min(r0 + k[0], h + p[0]), min(q0 + k[1], w + p[1])
            size = (r1 - r0) * (q1 - q0)
            r0c, q0c, r1c, q1c = max(r0, 0), max(q0, 0), min(r1, h), min(q1, w)
            total = x[:, :, r0c:r1c, q0c:q1c].sum(axis=(2, 3))
            out[:, :, i, j] = total / (size if count_include_pad else (r1c - r0c) * (q1c - q0c))
    return out
