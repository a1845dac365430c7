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
#: the largest column buffer a strided grad_input builds (bytes); beyond, the implicit GEMM
COLUMNS_MAX = 1 << 30
#: launch plans and index tables kept per backend (a training loop uses a handful; shapes
#: that never repeat clear them)
_KEPT = 64


def conv2d(b, x, weight, stride, padding, dilation, groups):
    key = (FORWARD, x.shape, weight.shape, None, stride, padding, dilation, groups, x.dtype)
    plan = _plan(b, key)
    if plan is None:
        return fallbacks.conv2d(b, x, weight, stride, padding, dilation, groups)
    return _run(b, plan, _dense(b, weight), _dense(b, x))


def conv2d_grad_input(b, grad_output, weight, input_shape, stride, padding, dilation, groups):
    if b.is_gpu and groups == 1 and tuple(stride) != (1, 1):
        out = _strided_grad_input(b, grad_output, weight, input_shape, stride, padding,
                                  dilation)
        if out is not None:
            return out
    key = (GRAD_INPUT, input_shape, weight.shape, grad_output.shape[2:], stride, padding,
           dilation, groups, grad_output.dtype)
    plan = _plan(b, key)
    if plan is None:
        return fallbacks.conv2d_grad_input(b, grad_output, weight, input_shape, stride,
                                           padding, dilation, groups)
    return _run(b, plan, _dense(b, weight), _dense(b, grad_output))


def conv2d_grad_weight(b, x, grad_output, weight_shape, stride, padding, dilation, groups):
    key = (GRAD_WEIGHT, x.shape, weight_shape, grad_output.shape[2:], stride, padding,
           dilation, groups, x.dtype)
    plan = _plan(b, key)
    if plan is None:
        return fallbacks.conv2d_grad_weight(b, x, grad_output, weight_shape, stride, padding,
                                            dilation, groups)
    return _run(b, plan, _dense(b, grad_output), _dense(b, x))


def _strided_grad_input(b, grad_output, weight, input_shape, stride, padding, dilation):
    """A strided convolution's input gradient on a GPU as one product, weight^T @ grad_output
    (C * kh * kw rows, a column per output pixel), and a gather of the taps that cover each
    input element (kernels/col2im.cl): the implicit GEMM would multiply by zero in all but
    about one tap in sh * sw (ResNet-18's stride-2 3x3 layers on an H100: 1.3 ms each, 4x
    cuDNN's). None where it does not apply (halves, 31-bit offsets, columns over
    COLUMNS_MAX bytes: the implicit GEMM needs no such buffer)."""
    n, c, h, w = input_shape
    o, _, kh, kw = weight.shape
    oh, ow = grad_output.shape[2:]
    rows, pixels, size = c * kh * kw, n * oh * ow, prod(input_shape)
    dtype = grad_output.dtype
    if (dtype not in (np.float32, np.float64) or max(rows * pixels, size, o * pixels) >= 2**31
            or rows * pixels * dtype.itemsize > COLUMNS_MAX):
        return None
    w_t = b.permute(b.reshape(weight, (o, rows)), (1, 0))
    g = b.reshape(b.permute(grad_output, (1, 0, 2, 3)), (o, pixels))
    cols = _dense(b, b.matmul(w_t, g))
    out = b._new(tuple(input_shape), dtype, "conv2d")
    layout = (c, h, w, kh, kw, oh, ow, *stride, *padding, *dilation, pixels, size)
    kernel = b.kernels.get("col2im.cl", "col2im", (("IDX", "int"), ("LAYOUT_LEN", len(layout)),
                                                   ("T", ctype(dtype))))
    b._launch(kernel, size, (out.data, cols.data, b.layout(layout, np.int32)))
    return out


# ---- launching ----------------------------------------------------------------------------------


def _dense(b, x: CLArray) -> CLArray:
    """`x` row-major from offset 0 (the tables assume it), copying only when it is not."""
    return x if x.contiguous and x.offset == 0 else b.copy(x)


def _run(b, plan, a: CLArray, source: CLArray) -> CLArray:
    kernel, grid, local, args, splits, size, out_shape = plan
    out = b._new((splits * size,), source.dtype, "conv2d")
    b.enqueue(kernel, grid, local, (out.data, a.data, source.data, *args))
    if splits > 1:  # the chunks' partial products, added in a fixed order
        out = b.sum(out.view((splits, size), (size, 1), 0), (0,), False)
    return out.view(out_shape, c_strides(out_shape), 0)


def _plan(b, key):
    """The launch of one call (kernel, grid, tables, layout, split count), kept per call
    signature: a training loop repeats a handful of them, each then costs a dict lookup."""
    plans = b.__dict__.setdefault("_conv_plans", {})
    plan = plans.get(key, False)
    if plan is False:
        if len(plans) >= _KEPT:
            plans.clear()
        plan = plans[key] = _make_plan(b, *key)
    return plan


def _make_plan(b, mode, shape, w_shape, out_hw, stride, padding, dilation, groups, dtype):
    n, c, h, w = shape
    o, cg, kh, kw = w_shape
    if out_hw is None:
        out_hw = tuple(fallbacks.conv_output_size(s, k, st, p, d) for s, k, st, p, d in
                       zip((h, w), (kh, kw), stride, padding, dilation, strict=True))
    oh, ow = out_hw
    geometry = (n, c, h, w, o, cg, kh, kw, oh, ow, groups, *stride, *padding, *dilation)
    # every offset the kernel and its tables form must fit in 31 bits
    if max(n * c * h * w, n * o * oh * ow, o * cg * kh * kw) * 64 >= 2**31:
        return None
    og, taps, pixels = o // groups, cg * kh * kw, n * oh * ow
    if mode == FORWARD:
        out_shape = (n, o, oh, ow)
        m, nc, k, source_group, channel, a_group, a_row = (
            og, pixels, taps, cg * h * w, oh * ow, og * taps, taps)
        tables = (_pixel_table(b, geometry), _tap_table(b, geometry))
    elif mode == GRAD_INPUT:
        out_shape = tuple(shape)
        # A[c, (o, i, j)] = weight[g * og + o, c, i, j]: the output-tap table holds its offset
        m, nc, k, source_group, channel, a_group, a_row = (
            cg, n * h * w, og * kh * kw, og * oh * ow, h * w, og * taps, kh * kw)
        tables = (_input_pixel_table(b, geometry), _output_tap_table(b, geometry))
    else:
        out_shape = tuple(w_shape)
        m, nc, k, source_group, channel, a_group, a_row = (
            og, taps, pixels, cg * h * w, taps, og * oh * ow, oh * ow)
        tables = (_tap_table(b, geometry), _pixel_table(b, geometry))
    tm, tn, tk, wpt = tile(b, mode, m, nc, k)
    splits = _splits(b, -(-m // tm) * -(-nc // tn) * groups, k)
    chunk = -(-k // (splits * tk)) * tk
    splits = -(-k // chunk)
    size = prod(out_shape)
    layout = (m, nc, k, chunk, groups, h, w, source_group, channel, size, oh, ow, *stride,
              a_group, a_row)
    defines = (("IDX", "int"), ("LAYOUT_LEN", len(layout)), ("T", ctype(dtype)),
               ("MODE", mode), ("TM", tm), ("TN", tn), ("TK", tk), ("WPT", wpt),
               ("UNIT_STRIDE", int(mode == GRAD_INPUT and tuple(stride) == (1, 1))))
    kernel = b.kernels.get("conv.cl", "conv_gemm", defines)
    grid = (-(-nc // tn) * (tn // wpt), -(-m // tm) * (tm // wpt), groups * splits)
    args = (*tables, b.layout(layout, np.int32))
    return kernel, grid, (tn // wpt, tm // wpt, 1), args, splits, size, out_shape


def tile(b, mode: int, m: int, nc: int, k: int) -> tuple:
    """(TM, TN, TK, WPT) of the product's tiles, each work-item holding WPT x WPT outputs, from
    sweeps over the seed CNN's and ResNet-18's calls (bench/opencl_conv.py, an H100). GPUs:
    products of 128 rows of C or more and 1024 columns or more in 128 x 64 tiles of 8 x 8
    per work-item (ResNet-18's 3x3 layers from 128 channels: 15-27% less time than 4 x 4 in
    every mode, e.g. a 512-channel grad_input 0.54 -> 0.39 ms); else rows in 32s when there
    are few of them (a small layer's outputs, a grad_input's channels per group), else in 64s,
    the gradients' wide products in columns of 128 (an H200: the seed's conv2 grad_input
    0.28 -> 0.19 ms). CPUs run a work-group's items in turn: 32 x 32 tiles (64 items) took
    the least time over all of the seed CNN's calls on PoCL."""
    if not b.is_gpu:
        return 32, 32, TK, 4
    if m >= 128 and nc >= 1024:
        return 128, 64, TK, 8
    return (32 if m <= 32 else 64), (128 if mode != FORWARD and nc >= 512 else 64), TK, 4


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
        if len(tables) >= _KEPT:
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
    """Per (o, i, j) of a group: (o * OH * OW, i * dh, j * dw, offset of weight[o, 0, i, j]
    from the group's first weight)."""
    n, c, h, w, o, cg, kh, kw, oh, ow, groups, sh, sw, ph, pw, dh, dw = geometry
    og = o // groups

    def build():
        oc, i, j = np.meshgrid(np.arange(og), np.arange(kh), np.arange(kw), indexing="ij")
        return np.stack([oc * oh * ow, i * dh, j * dw, oc * cg * kh * kw + i * kw + j], -1)

    return _cached(b, ("output_tap", og, cg, oh, ow, kh, kw, dh, dw), build)
