"""Deliberately faulty backends: the NumPy reference with one realistic bug each.

Every bug lives where a real backend's would: in a primitive or an optional fast path (op
backward passes are core code, shared by every backend). `FAULTS` maps a name to the backend
class, what the bug is, and the ops whose conformance tests must flag it; test_faults.py
asserts the kit flags every one and passes the unmodified reference (`Faithful`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
from ndlite_numpy import NumpyBackend

from ndlite.device import fallbacks
from ndlite.device.halfmath import native_half
from ndlite.dtypes import HALF


class Faithful(NumpyBackend):
    """The reference under another name: the kit must pass it."""

    kind = name = "faithful"

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        # registered under its class name in snake case (registry names are lower case)
        cls.kind = cls.name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls.__name__).lower()

    def __init__(self, device=None):
        super().__init__(None)


# ---- reductions -------------------------------------------------------------------------------


class SumFirstAxisOnly(Faithful):
    """A reduction kernel whose launch grid covers one axis: asked for several axes it sums the
    first and takes element 0 of the others. The gradient of an input broadcast along two dims
    (unbroadcast sums both) comes out wrong, and so does sum over several dims."""

    def sum(self, x, axes, keepdims):
        if len(axes) <= 1:
            return super().sum(x, axes, keepdims)
        out = np.add.reduce(x, axis=axes[0], keepdims=True)
        index = tuple(slice(0, 1) if d in axes[1:] else slice(None) for d in range(x.ndim))
        out = out[index]
        return out if keepdims else np.asarray(out.reshape([n for d, n in enumerate(x.shape)
                                                           if d not in axes]))


class Float16Sum(Faithful):
    """A reduction that accumulates in float16 (a "fast" half-precision accumulator)."""

    def sum(self, x, axes, keepdims):
        if x.dtype.kind != "f":
            return super().sum(x, axes, keepdims)
        half = np.add.reduce(x.astype(np.float16), axis=axes, keepdims=keepdims)
        return np.asarray(half).astype(x.dtype)


class NondeterministicSum(Faithful):
    """A reduction whose order changes from run to run, as with atomic adds: each result is
    within the tolerance, but two runs differ bitwise."""

    _calls = itertools.count()

    def sum(self, x, axes, keepdims):
        if x.dtype.kind != "f" or not axes:
            return super().sum(x, axes, keepdims)
        rng = np.random.default_rng(next(self._calls))
        moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
        flat = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,))
        flat = flat[..., rng.permutation(flat.shape[-1])]
        out = np.zeros(flat.shape[:-1], x.dtype)
        for k in range(flat.shape[-1]):  # sequential, in the shuffled order
            out = out + flat[..., k]
        if keepdims:
            out = out.reshape([1 if d in axes else n for d, n in enumerate(x.shape)])
        return np.asarray(out)


# ---- elementwise ------------------------------------------------------------------------------


class ExpSlightlyOff(Faithful):
    """A fast-math exp whose range reduction uses ln 2 truncated to 0.6931: exact near 0,
    off by about 5e-5 relative per power of two away from it (x = k ln 2 + r)."""

    def __init__(self, device=None):
        super().__init__(device)
        self.exp = self._exp  # the reference binds its ufuncs per instance

    def _exp(self, x):
        k = np.round(x / np.log(2))
        r = x - k * x.dtype.type(0.6931)  # the bug: ln 2 is 0.693147...
        return np.asarray(np.ldexp(np.exp(r), k.astype(np.int32))).astype(x.dtype)


class IntScalarDropped(Faithful):
    """A scalar kernel that takes its operand as a float argument and silently drops a Python
    int: dividing by the element count does nothing, so every mean is a sum and every
    mean-reduced loss reduces by sum instead of mean."""

    def __init__(self, device=None):
        super().__init__(device)
        divide = self.div
        self.div = lambda a, b: a.copy() if type(b) is int else divide(a, b)


# ---- loss fast paths ----------------------------------------------------------------------------


class NllMeanAsSum(Faithful):
    """The nll_loss fast path reducing "mean" by the sum (the division by the count of labels
    not ignored was forgotten), in the loss and in its gradient: nll_loss and cross_entropy
    (which ends in it) come out N times too large."""

    def nll_loss(self, input, target, ignore_index, reduction):
        reduction = "sum" if reduction == "mean" else reduction  # the bug
        return super().nll_loss(input, target, ignore_index, reduction)

    def nll_loss_grad(self, grad_output, target, classes, ignore_index, reduction):
        reduction = "sum" if reduction == "mean" else reduction  # the bug
        return super().nll_loss_grad(grad_output, target, classes, ignore_index, reduction)


# ---- gather / scatter -------------------------------------------------------------------------


class ScatterIgnoresIndexBroadcast(Faithful):
    """scatter_add reading its index buffer with the values' strides (index[flat % size]),
    ignoring that the index broadcasts along size-1 dims (gather's gradient no longer relies on
    it: torch.gather's index has the output's shape)."""

    def scatter_add(self, index, values, axis, size):
        if index.shape != values.shape:
            index = np.resize(index, values.shape)
        return super().scatter_add(index, values, axis, size)


# ---- convolution fast paths ---------------------------------------------------------------------


def _col2im_off_by_one(b, cols, input_shape, stride, padding, dilation):
    """fallbacks.col2im, but cropping the padded sum one row and column early."""
    n, c, kh, kw, oh, ow = cols.shape
    h, w = input_shape[2], input_shape[3]
    ph, pw = padding
    out = b.full((n, c, h + 2 * ph, w + 2 * pw), 0, cols.dtype)
    for k, off in enumerate(fallbacks._offsets((kh, kw), dilation)):
        i, j = divmod(k, kw)
        part = b.slice(cols, (slice(0, n, 1), slice(0, c, 1), i, j))
        view = fallbacks._window_slices(b, out, off, stride, (oh, ow))
        b.assign(view, b.add(view, part))
    top, left = max(ph - 1, 0), max(pw - 1, 0)  # the bug: should be ph, pw
    return b.slice(out, (slice(0, n, 1), slice(0, c, 1), slice(top, top + h, 1),
                         slice(left, left + w, 1)))


class Col2imPaddingOffByOne(Faithful):
    """conv2d's input gradient with col2im cropping the padding one element early."""

    def conv2d_grad_input(self, grad_output, weight, input_shape, stride, padding, dilation,
                          groups):
        o, cg, kh, kw = weight.shape
        n, _, oh, ow = grad_output.shape
        w = self.reshape(weight, (1, groups, o // groups, cg * kh * kw))
        g = self.reshape(grad_output, (n, groups, o // groups, oh * ow))
        cols = self.matmul(self.permute(w, (0, 1, 3, 2)), g)
        cols = self.reshape(cols, (n, groups * cg, kh, kw, oh, ow))
        return _col2im_off_by_one(self, cols, input_shape, stride, padding, dilation)


class WeightGradTransposed(Faithful):
    """conv2d's weight gradient with the kernel's rows and columns swapped (the columns of
    im2col read back in (kw, kh) order)."""

    def conv2d_grad_weight(self, x, grad_output, weight_shape, stride, padding, dilation,
                           groups):
        right = super().conv2d_grad_weight(x, grad_output, weight_shape, stride, padding,
                                           dilation, groups)
        o, cg, kh, kw = weight_shape
        return np.ascontiguousarray(right.transpose(0, 1, 3, 2)).reshape(weight_shape)


def _im2col_wrong_stride(b, x, kernel_size, stride, padding, dilation):
    """fallbacks.im2col stepping both dims by the row stride."""
    n, c, h, w = x.shape
    kh, kw = kernel_size
    out = tuple(fallbacks.conv_output_size(s, k, st, p, d) for s, k, st, p, d in
                zip((h, w), kernel_size, stride, padding, dilation, strict=False))
    xp = fallbacks._padded(b, x, padding, (0, 0), 0)
    wrong = (stride[0], stride[0])  # the bug: should be `stride`
    pieces = [b.reshape(fallbacks._window_slices(b, xp, off, wrong, out), (n, c, 1) + out)
              for off in fallbacks._offsets(kernel_size, dilation)]
    cols = pieces[0] if len(pieces) == 1 else b.concatenate(pieces, 2)
    return b.reshape(cols, (n, c, kh, kw) + out)


class Im2colWrongStride(Faithful):
    """conv2d forward whose im2col uses the row stride for the columns too."""

    def conv2d(self, x, weight, stride, padding, dilation, groups):
        o, cg, kh, kw = weight.shape
        n = x.shape[0]
        cols = _im2col_wrong_stride(self, x, (kh, kw), stride, padding, dilation)
        oh, ow = cols.shape[4], cols.shape[5]
        cols = self.reshape(cols, (n, groups, cg * kh * kw, oh * ow))
        w = self.reshape(weight, (1, groups, o // groups, cg * kh * kw))
        return self.reshape(self.matmul(w, cols), (n, o, oh, ow))


# ---- pooling fast paths -----------------------------------------------------------------------


class MaxPoolTieToLast(Faithful):
    """max_pool2d comparing with >= instead of >: a tie's index (and so its gradient) goes to
    the last maximal element of the window instead of the first."""

    def max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode):
        out, extra = fallbacks._pool_geometry(x.shape, kernel_size, stride, padding, dilation,
                                              ceil_mode)
        xp = fallbacks._padded(self, x, padding, extra, -np.inf)
        values = indices = None
        for off in fallbacks._offsets(kernel_size, dilation):
            v = fallbacks._window_slices(self, xp, off, stride, out)
            pos = fallbacks._positions(x.shape, off, stride, padding, out)
            if values is None:
                values, indices = v.copy(), np.broadcast_to(pos, v.shape).copy()
                continue
            better = (v >= values) & (v > -np.inf)  # the bug: >= lets a later tie win
            values = np.where(better, v, values)
            indices = np.where(better, pos, indices)
        return values, indices


# ---- half precision ----------------------------------------------------------------------------

_HALF = {np.dtype(np.float16)} | ({np.dtype(HALF[1])} if len(HALF) > 1 else set())


def _sequential_in(dtype, terms):
    """The terms summed one by one in `dtype`: every partial sum rounded to it."""
    acc = np.zeros_like(terms[0], dtype=dtype)
    for term in terms:
        acc = (acc + term.astype(dtype)).astype(dtype)
    return acc


class HalfAccumulation(Faithful):
    """Half-precision matmul and sum kernels whose accumulator is a half (the "fast" choice of
    a kernel writer with a half type at hand): each product and each partial sum is rounded
    to float16/bfloat16. Within the scaled rule (R eps S grows with the sum), so only the
    tight half check flags it."""

    @native_half
    def matmul(self, a, b):
        if a.dtype not in _HALF or a.ndim < 2 or b.ndim < 2:
            return super().matmul(a, b)
        terms = [(a[..., :, k:k + 1] * b[..., k:k + 1, :]).astype(a.dtype)
                 for k in range(a.shape[-1])]
        return _sequential_in(a.dtype, terms)

    @native_half
    def sum(self, x, axes, keepdims):
        if x.dtype not in _HALF or not axes:
            return super().sum(x, axes, keepdims)
        moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
        flat = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,))
        out = _sequential_in(x.dtype, [flat[..., k] for k in range(flat.shape[-1])])
        if keepdims:
            out = out.reshape([1 if d in axes else n for d, n in enumerate(x.shape)])
        return np.asarray(out)


class HalfDivisionRoundsTwice(Faithful):
    """A half division computed as a * (1 / b) with the reciprocal stored in the half: two
    roundings, each right alone, and the quotient is no longer correctly rounded (which
    computing in float32 and rounding once gives, so the kit asks for it bitwise)."""

    def __init__(self, device=None):
        super().__init__(device)
        divide = self.div  # the reference binds its ufuncs per instance
        self.div = lambda a, b: (self._div(a, b) if getattr(a, "dtype", None) in _HALF
                                 else divide(a, b))

    @staticmethod
    def _div(a, b):
        reciprocal = (1 / np.asarray(b, np.float32)).astype(a.dtype)  # the first rounding
        return np.asarray(a.astype(np.float32) * reciprocal.astype(np.float32)).astype(a.dtype)


class HalfProductsRoundedTwice(Faithful):
    """A half matmul that rounds each product to the half before its float32 sum, then
    rounds the sum: a half ulp of error per product, which the tight half check flags."""

    @native_half
    def matmul(self, a, b):
        if a.dtype not in _HALF or a.ndim < 2 or b.ndim < 2:
            return super().matmul(a, b)
        products = a[..., :, :, None].astype(np.float32) * b[..., None, :, :].astype(np.float32)
        rounded = products.astype(a.dtype).astype(np.float32)  # each product rounded first
        return np.asarray(rounded.sum(axis=-2)).astype(a.dtype)


@dataclass(frozen=True)
class Fault:
    backend: type
    ops: tuple  # ops whose conformance test must flag it
    what: str = ""
    check: str = ""  # a word the failure report must hold ("determinism": the check that fails)
    dtypes: tuple = ("float32",)  # the dtypes the bug shows in

    @property
    def name(self) -> str:
        return self.backend.name


FAULTS = {f.name: f for f in [
    Fault(SumFirstAxisOnly, ("sum", "add"), "gradient of a broadcast input ignores a dim"),
    Fault(Col2imPaddingOffByOne, ("conv2d",), "col2im off by one in the padding"),
    Fault(WeightGradTransposed, ("conv2d",), "conv weight gradient transposed"),
    Fault(MaxPoolTieToLast, ("max_pool2d",), "max-pool gradient sent to the wrong element"),
    Fault(NllMeanAsSum, ("nll_loss", "cross_entropy"), "a loss reducing by sum, not mean"),
    Fault(IntScalarDropped, ("mse_loss", "l1_loss", "mean"), "every mean becomes a sum"),
    Fault(Float16Sum, ("sum", "mean"), "float16 accumulation in a reduction"),
    Fault(Im2colWrongStride, ("conv2d",), "wrong stride in im2col"),
    Fault(NondeterministicSum, ("sum",), "non-deterministic reduction order", "determinism"),
    Fault(ExpSlightlyOff, ("exp", "softmax"), "exp slightly off"),
    Fault(ScatterIgnoresIndexBroadcast, ("scatter_add",), "scatter ignores index broadcasting"),
    Fault(HalfAccumulation, ("matmul", "mm", "sum"), "accumulates in half", "tight half",
          ("float16", "bfloat16")),
    Fault(HalfDivisionRoundsTwice, ("div",), "rounds the reciprocal to half", "bitwise",
          ("float16", "bfloat16")),
    Fault(HalfProductsRoundedTwice, ("matmul", "mm"), "rounds each product to half",
          "tight half", ("float16", "bfloat16")),
]}
