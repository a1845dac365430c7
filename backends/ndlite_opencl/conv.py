"""conv2d, conv2d_grad_input and conv2d_grad_weight as one implicit GEMM (kernels/conv.cl).

Each of the three is a product per group whose im2col side is read from the image through two
small index tables (one entry per pixel, one per kernel tap) rather than written out first:
no column buffer, and the gradient with respect to the input gathers per input element (no
atomics). Products too small to fill the device split their k range into chunks whose partial
results a fixed-order sum adds (split-K), so the result is bitwise the same run to run.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import fallbacks

from .array import CLArray, c_strides
from .kernels import ctype

FORWARD, GRAD_INPUT, GRAD_WEIGHT = 1, 2, 3
TK = 16
#: a split-K chunk holds at least this many k (shorter ones cost more in partials than they gain)
MIN_CHUNK = 64
_TABLES_KEPT = 64


def conv2d(b, x, weight, stride, padding, dilation, groups):
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    oh, ow = (fallbacks.conv_output_size(s, k, st, p, d) for s, k, st, p, d in
              zip((h, w), (kh, kw), stride, padding, dilation, strict=True))
    geometry = (n, c, h, w, o, cg, kh, kw, oh, ow, groups, *stride, *padding, *dilation)
    if not _fits(geometry):
        return fallbacks.conv2d(b, x, weight, stride, padding, dilation, groups)
    pixels = _pixel_table(b, geometry)
    taps = _tap_table(b, geometry)
    og = o // groups
    out_shape = (n, o, oh, ow)
    layout = _layout(og, n * oh * ow, cg * kh * kw, geometry, source_group=cg * h * w,
                     channel=oh * ow, a_group=og * cg * kh * kw, a_row=cg * kh * kw)
    return _run(b, FORWARD, out_shape, _dense(b, weight), _dense(b, x), pixels, taps, layout,
                geometry, False)


def conv2d_grad_input(b, grad_output, weight, input_shape, stride, padding, dilation, groups):
    n, c, h, w = input_shape
    o, cg, kh, kw = weight.shape
    oh, ow = grad_output.shape[2], grad_output.shape[3]
    geometry = (n, c, h, w, o, cg, kh, kw, oh, ow, groups, *stride, *padding, *dilation)
    if not _fits(geometry):
        return fallbacks.conv2d_grad_input(b, grad_output, weight, input_shape, stride,
                                           padding, dilation, groups)
    og = o // groups
    # A[g, c, (o, i, j)] = weight[g * og + o, c, i, j]: the weight is small, a copy is cheap
    wt = b.copy(b.permute(b.reshape(_dense(b, weight), (groups, og, cg, kh * kw)),
                          (0, 2, 1, 3)))
    layout = _layout(cg, n * h * w, og * kh * kw, geometry, source_group=og * oh * ow,
                     channel=h * w, a_group=cg * og * kh * kw, a_row=og * kh * kw)
    unit = stride == (1, 1)
    return _run(b, GRAD_INPUT, tuple(input_shape), wt, _dense(b, grad_output),
                _input_pixel_table(b, geometry), _output_tap_table(b, geometry), layout,
                geometry, unit)


def conv2d_grad_weight(b, x, grad_output, weight_shape, stride, padding, dilation, groups):
    n, c, h, w = x.shape
    o, cg, kh, kw = weight_shape
    oh, ow = grad_output.shape[2], grad_output.shape[3]
    geometry = (n, c, h, w, o, cg, kh, kw, oh, ow, groups, *stride, *padding, *dilation)
    if not _fits(geometry):
        return fallbacks.conv2d_grad_weight(b, x, grad_output, weight_shape, stride, padding,
                                            dilation, groups)
    og = o // groups
    layout = _layout(og, cg * kh * kw, n * oh * ow, geometry, source_group=cg * h * w,
                     channel=cg * kh * kw, a_group=og * oh * ow, a_row=oh * ow)
    return _run(b, GRAD_WEIGHT, tuple(weight_shape), _dense(b, grad_output), _dense(b, x),
                _tap_table(b, geometry), _pixel_table(b, geometry), layout, geometry, False)


# ---- launching ----------------------------------------------------------------------------------


def _fits(geometry) -> bool:
    """Whether every offset the kernel and its tables form fits in 31 bits."""
    n, c, h, w, o, cg, kh, kw, oh, ow = geometry[:10]
    return max(n * c * h * w, n * o * oh * ow, o * cg * kh * kw) * 64 < 2**31


def _dense(b, x: CLArray) -> CLArray:
    """`x` row-major from offset 0 (the tables assume it), copying only when it is not."""
    return x if x.contiguous and x.offset == 0 else b.copy(x)


def _layout(m, nc, k, geometry, source_group, channel, a_group, a_row) -> list:
    n, c, h, w, o, cg, kh, kw, oh, ow, groups, sh, sw = geometry[:13]
    return [m, nc, k, 0, groups, h, w, source_group, channel, 0, oh, ow, sh, sw, a_group, a_row]


def _run(b, mode, out_shape, a, source, n_table, k_table, layout, geometry, unit_stride):
    m, nc, k, groups = layout[0], layout[1], layout[2], layout[4]
    dtype = source.dtype
    tm, tn, tk = tile(b, mode, m, nc, k)
    tiles = -(-m // tm) * -(-nc // tn) * groups
    splits = _splits(b, tiles, k)
    chunk = -(-k // (splits * tk)) * tk
    splits = -(-k // chunk)
    size = prod(out_shape)
    layout[3], layout[9] = chunk, size
    out = b._new((splits * size,), dtype, "conv2d")
    defines = (("IDX", "int"), ("LAYOUT_LEN", len(layout)), ("T", ctype(dtype)),
               ("MODE", mode), ("TM", tm), ("TN", tn), ("TK", tk),
               ("UNIT_STRIDE", int(unit_stride)))
    kernel = b.kernels.get("conv.cl", "conv_gemm", defines)
    grid = (-(-nc // tn) * (tn // 4), -(-m // tm) * (tm // 4), groups * splits)
    b.enqueue(kernel, grid, (tn // 4, tm // 4, 1),
              (out.data, a.data, source.data, n_table, k_table, b.layout(layout, np.int32)))
    if splits > 1:
        out = b.sum(out.view((splits, size), (size, 1), 0), (0,), False)
    return out.view(out_shape, c_strides(out_shape), 0)


def tile(b, mode: int, m: int, nc: int, k: int) -> tuple:
    """(TM, TN, TK) of the product's tiles. GPUs: rows of C in 32s when there are few of them
    (a grad_input's channels per group, a small layer's outputs), else in 64s. CPUs run a
    work-group's items in turn: 32 x 32 tiles (64 items) were fastest on PoCL for every
    call of the seed CNN (bench/opencl_conv.py)."""
    if not b.is_gpu:
        return 32, 32, TK
    return (32 if m <= 32 else 64), 64, TK


def _splits(b, tiles: int, k: int) -> int:
    """How many k-chunks: enough work-groups for every compute unit twice over (GPUs), each
    chunk at least MIN_CHUNK long. CPUs run work-groups in turn: fewer, longer chunks."""
    target = 2 * b.compute_units if b.is_gpu else b.compute_units
    if tiles >= target:
        return 1
    return max(1, min(-(-target // tiles), k // MIN_CHUNK))


# ---- index tables (built on the host once per geometry, kept on the device) -------------------


def _cached(b, key, build):
    tables = b.__dict__.setdefault("_conv_tables", {})
    table = tables.get(key)
    if table is None:
        if len(tables) >= _TABLES_KEPT:
            tables.clear()
        host = np.ascontiguousarray(build(), dtype=np.int32)
        table = tables[key] = b.from_numpy(host.reshape(-1)).data
    return table


def _pixel_table(b, geometry):
    """Per output pixel (image, oy, ox): (x offset of its window's corner, corner row, corner
    column, offset in the output without the channel)."""
    n, c, h, w, o, cg, kh, kw, oh, ow, groups, sh, sw, ph, pw = geometry[:15]

    def build():
        img, oy, ox = np.meshgrid(np.arange(n), np.arange(oh), np.arange(ow), indexing="ij")
        iy, ix = oy * sh - ph, ox * sw - pw
        return np.stack([img * c * h * w + iy * w + ix, iy, ix,
                         img * o * oh * ow + oy * ow + ox], -1)

    return _cached(b, ("pixel", n, c, h, w, o, oh, ow, sh, sw, ph, pw), build)


def _tap_table(b, geometry):
    """Per tap (c, i, j) of a window: (x offset from the corner, i * dh, j * dw, 0)."""
    n, c, h, w, o, cg, kh, kw, oh, ow, groups, sh, sw, ph, pw, dh, dw = geometry

    def build():
        ch, i, j = np.meshgrid(np.arange(cg), np.arange(kh) * dh, np.arange(kw) * dw,
                               indexing="ij")
        return np.stack([ch * h * w + i * w + j, i, j, np.zeros_like(i)], -1)

    return _cached(b, ("tap", cg, h, w, kh, kw, dh, dw), build)


def _input_pixel_table(b, geometry):
    """Per input pixel (image, y, x): (grad_output offset of its image, y + ph, x + pw,
    offset in grad_input without the channel)."""
    n, c, h, w, o, cg, kh, kw, oh, ow, groups, sh, sw, ph, pw = geometry[:15]

    def build():
        img, y, x = np.meshgrid(np.arange(n), np.arange(h), np.arange(w), indexing="ij")
        return np.stack([img * o * oh * ow, y + ph, x + pw, img * c * h * w + y * w + x], -1)

    return _cached(b, ("input", n, c, h, w, o, oh, ow, ph, pw), build)


def _output_tap_table(b, geometry):
    """Per (o, i, j) of a group: (o * OH * OW, i * dh, j * dw, 0)."""
    n, c, h, w, o, cg, kh, kw, oh, ow, groups, sh, sw, ph, pw, dh, dw = geometry
    og = o // groups

    def build():
        oc, i, j = np.meshgrid(np.arange(og), np.arange(kh) * dh, np.arange(kw) * dw,
                               indexing="ij")
        return np.stack([oc * oh * ow, i, j, np.zeros_like(i)], -1)

    return _cached(b, ("output_tap", og, oh, ow, kh, kw, dh, dw), build)
