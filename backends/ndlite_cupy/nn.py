"""The neural-network fast paths of the CuPy backend (protocol.py): convolution, pooling,
log_softmax and the unweighted nll_loss, on the kernels in kernels/{conv,pool,loss}.cu.

Convolution goes to cuDNN first (cudnn.py: float32, float16, bfloat16, while it is on); what
it declines, float64, and everything when it is off run here. Halves that reach these
functions (cuDNN on, so half.py leaves them unwrapped) run here on float32 copies, rounded once.

ndlite's convolution is im2col + cuBLAS. The columns keep the batch innermost,
(C*kh*kw, N*OH*OW), so each group of a layer is ONE matrix product (blas.py: cublasGemmEx as
cupy.matmul calls it, transposed operands passed as flags, never copied, float32 in full
precision, and recordable in a CUDA graph). The price is a transpose between (O, N, OH*OW)
and NCHW, one kernel.
- forward: im2col(x), weight (O, C*kh*kw) @ cols, transpose to (N, O, OH, OW);
- grad_weight: grad_output transposed to (O, N*OH*OW) @ im2col(x)^T;
- grad_input: weight^T @ grad_output transposed, then col2im: a gather, one thread per input
  element over the columns that read it (no atomics).
Pooling and its gradients are one kernel each (gathers, no atomics); log_softmax one kernel;
nll_loss one block-reduction kernel and its gradient one or two.

Geometries and dtypes the kernels do not cover (empty tensors, non-float dtypes) take the
reference fallbacks. Every function takes the backend `b` first.
"""

from __future__ import annotations

import math

import cupy
import numpy as np

from ndlite.device import fallbacks
from ndlite.device.halfmath import in_float32
from ndlite.dtypes import HALF

from . import blas
from .kernels import launch, raw

#: the largest element count that still indexes with 32-bit ints (a grid-stride loop may run
#: up to MAX_BLOCKS * THREADS past the end before it stops)
INT32_LIMIT = 2**31 - 2**23
FLOATS = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}


def _index(*sizes: int):
    """The index type for arrays of these sizes: ("int32", np.int32) or the 64-bit pair."""
    if max(sizes) < INT32_LIMIT:
        return "int32", np.int32
    return "int64", np.int64


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


# ---- convolution ------------------------------------------------------------------------------


def _geometry(kernel_size, stride, padding, dilation, cast) -> tuple:
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    return tuple(cast(v) for v in (kh, kw, sh, sw, ph, pw, dh, dw))


def im2col(x, kernel_size, stride, padding, dilation):
    """The columns (C*kh*kw, N*OH*OW) of a contiguous x (N, C, H, W), and (OH, OW)."""
    n, c, h, w = x.shape
    (kh, kw) = kernel_size
    oh = _out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = _out_size(w, kw, stride[1], padding[1], dilation[1])
    cols = cupy.empty((c * kh * kw, n * oh * ow), dtype=x.dtype)
    index, cast = _index(cols.size, x.size)
    kernel = raw("conv").get("ndl_im2col", FLOATS[x.dtype], index)
    launch(kernel, cols.size, (x, cols, cast(cols.size), cast(n), cast(c), cast(h), cast(w),
                               cast(oh), cast(ow),
                               *_geometry(kernel_size, stride, padding, dilation, cast)))
    return cols, (oh, ow)


def swap01(src, a: int, b: int, p: int):
    """A contiguous (a, b, p) array as a new contiguous (b, a, p) one."""
    dst = cupy.empty((b, a, p), dtype=src.dtype)
    index, cast = _index(dst.size)
    kernel = raw("conv").get("ndl_swap01", FLOATS[src.dtype], index)
    launch(kernel, dst.size, (src, dst, cast(dst.size), cast(a), cast(b), cast(p)))
    return dst


def _covered(*arrays) -> bool:
    """Whether the kernels handle these buffers: float32/float64, nothing empty."""
    return all(a.dtype in FLOATS and a.size > 0 for a in arrays)


def conv2d(b, x, weight, stride, padding, dilation, groups):
    if b._cudnn is not None:
        y = b._cudnn.fprop(x, weight, stride, padding, dilation, groups, b._recording is not None)
        if y is not None:
            return y
    if x.dtype in HALF:
        return _IN_FLOAT32["conv2d"](b, x, weight, stride, padding, dilation, groups)
    if not _covered(x, weight):
        return fallbacks.conv2d(b, x, weight, stride, padding, dilation, groups)
    n = x.shape[0]
    o, cg, kh, kw = weight.shape
    cols, (oh, ow) = im2col(cupy.ascontiguousarray(x), (kh, kw), stride, padding, dilation)
    w = cupy.ascontiguousarray(weight).reshape(o, cg * kh * kw)
    if groups == 1:
        y = blas.matmul(w, cols)
    else:  # group g: weight rows g*O/G.., columns rows g*Cg*kh*kw..
        y = cupy.empty((o, cols.shape[1]), dtype=x.dtype)
        og, ckg = o // groups, cg * kh * kw
        for g in range(groups):
            blas.matmul(w[g * og:(g + 1) * og], cols[g * ckg:(g + 1) * ckg],
                        out=y[g * og:(g + 1) * og])
    return swap01(y, o, n, oh * ow).reshape(n, o, oh, ow)


def _grad_rows(grad_output):
    """grad_output (N, O, OH, OW) as a contiguous (O, N*OH*OW) matrix."""
    n, o, oh, ow = grad_output.shape
    g = swap01(cupy.ascontiguousarray(grad_output), n, o, oh * ow)
    return g.reshape(o, n * oh * ow)


def conv2d_grad_weight(b, x, grad_output, weight_shape, stride, padding, dilation, groups):
    if b._cudnn is not None:
        grad_weight = b._cudnn.wgrad(x, grad_output, weight_shape, stride, padding, dilation,
                                     groups, b._recording is not None)
        if grad_weight is not None:
            return grad_weight
    if x.dtype in HALF:
        return _IN_FLOAT32["conv2d_grad_weight"](b, x, grad_output, weight_shape, stride,
                                                 padding, dilation, groups)
    if not _covered(x, grad_output):
        return fallbacks.conv2d_grad_weight(b, x, grad_output, weight_shape, stride, padding,
                                            dilation, groups)
    o, cg, kh, kw = weight_shape
    cols, _ = im2col(cupy.ascontiguousarray(x), (kh, kw), stride, padding, dilation)
    g = _grad_rows(grad_output)
    if groups == 1:
        grad_weight = blas.matmul(g, cols.T)
    else:
        grad_weight = cupy.empty((o, cg * kh * kw), dtype=x.dtype)
        og, ckg = o // groups, cg * kh * kw
        for gi in range(groups):
            blas.matmul(g[gi * og:(gi + 1) * og], cols[gi * ckg:(gi + 1) * ckg].T,
                        out=grad_weight[gi * og:(gi + 1) * og])
    return grad_weight.reshape(weight_shape)


def conv2d_grad_input(b, grad_output, weight, input_shape, stride, padding, dilation, groups):
    if b._cudnn is not None:
        grad_x = b._cudnn.dgrad(grad_output, weight, input_shape, stride, padding, dilation,
                                groups, b._recording is not None)
        if grad_x is not None:
            return grad_x
    if grad_output.dtype in HALF:
        return _IN_FLOAT32["conv2d_grad_input"](b, grad_output, weight, input_shape, stride,
                                                padding, dilation, groups)
    if not _covered(grad_output, weight) or math.prod(input_shape) == 0:
        return fallbacks.conv2d_grad_input(b, grad_output, weight, input_shape, stride, padding,
                                           dilation, groups)
    o, cg, kh, kw = weight.shape
    n, c, h, w = input_shape
    _, _, oh, ow = grad_output.shape
    g = _grad_rows(grad_output)
    wmat = cupy.ascontiguousarray(weight).reshape(o, cg * kh * kw)
    if groups == 1:
        cols = blas.matmul(wmat.T, g)
    else:
        cols = cupy.empty((c * kh * kw, g.shape[1]), dtype=g.dtype)
        og, ckg = o // groups, cg * kh * kw
        for gi in range(groups):
            blas.matmul(wmat[gi * og:(gi + 1) * og].T, g[gi * og:(gi + 1) * og],
                        out=cols[gi * ckg:(gi + 1) * ckg])
    grad_x = cupy.empty(input_shape, dtype=g.dtype)
    index, cast = _index(cols.size, grad_x.size)
    kernel = raw("conv").get("ndl_col2im", FLOATS[g.dtype], index)
    launch(kernel, grad_x.size, (cols, grad_x, cast(grad_x.size), cast(n), cast(c), cast(h),
                                 cast(w), cast(oh), cast(ow),
                                 *_geometry((kh, kw), stride, padding, dilation, cast)))
    return grad_x


#: how far cuDNN's first float32 result of a plan may be from ndlite's kernels, in float32
#: epsilons of each element's own sum of magnitudes, for sums of up to 256 terms; longer sums
#: get sqrt(terms / 256) times more (a float32 sum's rounding grows with the square root of
#: its length: the seed CNN's weight gradients, 73,728 terms each at batch 128, differ by a
#: few hundred). TF32 misses by thousands on short sums (its inputs keep 10 of 23 bits).
AGREE, AGREE_TERMS = 256, 256
_OWN = {"fprop": lambda b, x, w, shapes, g: conv2d(b, x, w, *g),
        "dgrad": lambda b, gy, w, shapes, g: conv2d_grad_input(b, gy, w, shapes[0], *g),
        "wgrad": lambda b, x, gy, shapes, g: conv2d_grad_weight(b, x, gy, shapes[1], *g)}


def cudnn_agrees(b, kind, first, second, out, shapes, geometry) -> str:
    """"" when cuDNN's `out` of a float32 call is within AGREE epsilons of ndlite's kernels
    (cudnn.Convolutions.verify), else why not; NaN and inf compare as agreeing."""
    convolutions, b._cudnn = b._cudnn, None  # ndlite's kernels for the calls below
    try:
        own = _OWN[kind]
        expected = own(b, first, second, shapes, geometry)
        scale = own(b, cupy.abs(first), cupy.abs(second), shapes, geometry)
    finally:
        b._cudnn = convolutions
    (n, _, _, _), (o, cg, kh, kw), (_, _, oh, ow) = shapes
    terms = {"fprop": cg * kh * kw, "dgrad": o // geometry[3] * kh * kw, "wgrad": n * oh * ow}
    allowed = AGREE * max(1.0, math.sqrt(terms[kind] / AGREE_TERMS))
    bound = allowed * float(np.finfo(np.float32).eps) * scale
    if not bool(cupy.any(cupy.abs(out - expected) > bound)):
        return ""
    return (f"cuDNN's {kind} plan missed ndlite's kernels by over {allowed:.0f} float32 "
            "epsilons of each element's sum of magnitudes (an engine computing below float32, "
            "as TF32)")


#: the convolutions on float32 copies of halves, rounded once (what cuDNN declines in half)
_IN_FLOAT32 = {f.__name__: in_float32(f, f.__name__)
               for f in (conv2d, conv2d_grad_input, conv2d_grad_weight)}


# ---- pooling ----------------------------------------------------------------------------------


def _pool_out(shape, kernel_size, stride, padding, dilation, ceil_mode) -> tuple:
    return tuple(fallbacks.pool_output_size(size, k, s, p, d, ceil_mode) for size, k, s, p, d in
                 zip(shape[2:], kernel_size, stride, padding, dilation, strict=True))


def max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode):
    if not _covered(x):
        return fallbacks.max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode)
    n, c, h, w = x.shape
    oh, ow = _pool_out(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    x = cupy.ascontiguousarray(x)
    values = cupy.empty((n, c, oh, ow), dtype=x.dtype)
    indices = cupy.empty((n, c, oh, ow), dtype=np.int64)
    index, cast = _index(x.size, values.size)
    kernel = raw("pool").get("ndl_max_pool", FLOATS[x.dtype], index)
    launch(kernel, values.size, (x, values, indices, cast(values.size), cast(h), cast(w),
                                 cast(oh), cast(ow),
                                 *_geometry(kernel_size, stride, padding, dilation, cast)))
    return values, indices


def max_pool2d_grad(b, grad_output, indices, input_shape, kernel_size, stride, padding,
                    dilation, ceil_mode):
    if not _covered(grad_output) or math.prod(input_shape) == 0:
        return fallbacks.max_pool2d_grad(b, grad_output, indices, input_shape, kernel_size,
                                         stride, padding, dilation, ceil_mode)
    _, _, h, w = input_shape
    _, _, oh, ow = grad_output.shape
    grad_output = cupy.ascontiguousarray(grad_output)
    indices = cupy.ascontiguousarray(indices, dtype=np.int64)
    grad_x = cupy.empty(input_shape, dtype=grad_output.dtype)
    index, cast = _index(grad_x.size, grad_output.size)
    kernel = raw("pool").get("ndl_max_pool_grad", FLOATS[grad_x.dtype], index)
    launch(kernel, grad_x.size, (grad_output, indices, grad_x, cast(grad_x.size), cast(h),
                                 cast(w), cast(oh), cast(ow),
                                 *_geometry(kernel_size, stride, padding, dilation, cast)))
    return grad_x


def avg_pool2d(b, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    if not _covered(x):
        return fallbacks.avg_pool2d(b, x, kernel_size, stride, padding, ceil_mode,
                                    count_include_pad)
    n, c, h, w = x.shape
    oh, ow = _pool_out(x.shape, kernel_size, stride, padding, (1, 1), ceil_mode)
    x = cupy.ascontiguousarray(x)
    out = cupy.empty((n, c, oh, ow), dtype=x.dtype)
    index, cast = _index(x.size, out.size)
    kernel = raw("pool").get("ndl_avg_pool", FLOATS[x.dtype], index)
    geometry = _geometry(kernel_size, stride, padding, (1, 1), cast)[:6]
    launch(kernel, out.size, (x, out, cast(out.size), cast(h), cast(w), cast(oh), cast(ow),
                              *geometry, np.bool_(count_include_pad)))
    return out


def avg_pool2d_grad(b, grad_output, input_shape, kernel_size, stride, padding, ceil_mode,
                    count_include_pad):
    if not _covered(grad_output) or math.prod(input_shape) == 0:
        return fallbacks.avg_pool2d_grad(b, grad_output, input_shape, kernel_size, stride,
                                         padding, ceil_mode, count_include_pad)
    _, _, h, w = input_shape
    _, _, oh, ow = grad_output.shape
    grad_output = cupy.ascontiguousarray(grad_output)
    grad_x = cupy.empty(input_shape, dtype=grad_output.dtype)
    index, cast = _index(grad_x.size, grad_output.size)
    kernel = raw("pool").get("ndl_avg_pool_grad", FLOATS[grad_x.dtype], index)
    geometry = _geometry(kernel_size, stride, padding, (1, 1), cast)[:6]
    launch(kernel, grad_x.size, (grad_output, grad_x, cast(grad_x.size), cast(h), cast(w),
                                 cast(oh), cast(ow), *geometry, np.bool_(count_include_pad)))
    return grad_x


# ---- log_softmax and nll_loss -----------------------------------------------------------------


def log_softmax(b, x, axis):
    if not _covered(x) or x.shape[axis] == 0:
        return fallbacks.log_softmax(b, x, axis)
    x = cupy.ascontiguousarray(x)
    length = x.shape[axis]
    inner = math.prod(x.shape[axis + 1:])
    rows = x.size // length
    out = cupy.empty(x.shape, dtype=x.dtype)
    index, cast = _index(x.size)
    kernel = raw("loss").get("ndl_log_softmax", FLOATS[x.dtype], index)
    launch(kernel, rows, (x, out, cast(rows), cast(length), cast(inner)))
    return out


#: threads of the nll kernels' single block (NDL_NLL_THREADS in loss.cu)
NLL_THREADS = 256


def nll_loss(b, input, target, ignore_index, reduction):
    if not _covered(input):
        return fallbacks.nll_loss(b, input, target, ignore_index, reduction)
    n, c = input.shape
    input = cupy.ascontiguousarray(input)
    target = cupy.ascontiguousarray(target, dtype=np.int64)
    out = cupy.empty((n,) if reduction == "none" else (), dtype=input.dtype)
    kernel = raw("loss").get("ndl_nll_loss", FLOATS[input.dtype])
    kernel((1,), (NLL_THREADS,), (input, target, out, np.int64(n), np.int64(c),
                                  np.int64(ignore_index), np.int32(REDUCTIONS[reduction])))
    return out


def nll_loss_grad(b, grad_output, target, classes, ignore_index, reduction):
    n = target.shape[0]
    if grad_output.dtype not in FLOATS or n * classes == 0:
        return fallbacks.nll_loss_grad(b, grad_output, target, classes, ignore_index, reduction)
    dtype = FLOATS[grad_output.dtype]
    grad_output = cupy.ascontiguousarray(grad_output)
    target = cupy.ascontiguousarray(target, dtype=np.int64)
    count = None
    if reduction == "mean":
        count = cupy.empty((), dtype=grad_output.dtype)
        raw("loss").get("ndl_nll_count", dtype)(
            (1,), (NLL_THREADS,), (target, count, np.int64(n), np.int64(ignore_index)))
    grad_input = cupy.empty((n, classes), dtype=grad_output.dtype)
    index, cast = _index(grad_input.size)
    kernel = raw("loss").get("ndl_nll_loss_grad", dtype, index)
    launch(kernel, grad_input.size, (grad_output, target, count, grad_input,
                                     cast(grad_input.size), cast(classes),
                                     np.int64(ignore_index), np.int32(REDUCTIONS[reduction])))
    return grad_input
