"""2-D pooling: max_pool2d (with PyTorch's flat indices), avg_pool2d, adaptive_avg_pool2d.

Max pooling keeps the int64 index of each window's first maximum (row-major), so its
gradient goes to exactly that element (DESIGN.md's tie rule) and its second derivative is a
gather at the same indices. Average pooling is linear: its gradient op and it are each
other's adjoints. adaptive_avg_pool2d is two averaging matrices (rows, then columns).
"""

from __future__ import annotations

import numbers
from functools import lru_cache

import numpy as np

from ..amp_state import switch as amp
from ..creation import tensor
from ..device.fallbacks import empty_windows, pool_output_size
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..graph import mode
from ..tensor import Tensor
from . import samples
from .conv import pair, positive
from .dispatch import apply, nary
from .gather import gather
from .registry import EXACT, SCALED, Op, Spec, declare, implements, register


def _check_input(x: Tensor, op: str) -> None:
    if x.ndim != 4:
        raise ShapeError(f"{op}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                         f"{x.shape}")
    if not is_floating(x.dtype):
        raise DTypeError(f"{op}: expected a floating input, got {x.dtype} (shape {x.shape})")


def pool_params(x: Tensor, kernel_size, stride, padding, dilation, ceil_mode, op: str) -> dict:
    """Checked pooling geometry as (h, w) pairs, PyTorch's rules and messages."""
    return dict(_checked_geometry(x.shape, _frozen(kernel_size), _frozen(stride),
                                  _frozen(padding), _frozen(dilation), bool(ceil_mode), op))


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


@lru_cache(maxsize=1024)
def _checked_geometry(shape, kernel_size, stride, padding, dilation, ceil_mode, op) -> tuple:
    # cached: a training step pools the same geometry every time (errors are not cached)
    kernel_size = positive(pair(kernel_size, "kernel_size", op), "kernel_size", op)
    stride = kernel_size if stride is None or stride == () else \
        positive(pair(stride, "stride", op), "stride", op)
    dilation = positive(pair(dilation, "dilation", op), "dilation", op)
    padding = pair(padding, "padding", op)
    if min(padding) < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {padding}")
    if padding[0] > kernel_size[0] // 2 or padding[1] > kernel_size[1] // 2:
        raise ValueError(f"{op}: padding {padding} should be at most half of the kernel size "
                         f"{kernel_size}")
    for size, k, s, p, d in zip(shape[2:], kernel_size, stride, padding, dilation, strict=True):
        o = pool_output_size(size, k, s, p, d, ceil_mode)
        if o < 1:
            raise ShapeError(f"{op}: the output size would be less than 1 for an input of "
                             f"shape {shape} (kernel {kernel_size}, stride {stride}, padding "
                             f"{padding}, dilation {dilation})")
        if empty_windows(size, k, s, p, d, o):
            raise ShapeError(f"{op}: some windows of an input of shape {shape} hold only "
                             f"padding (kernel {kernel_size}, dilation {dilation}, padding "
                             f"{padding}); use less padding or dilation")
    return (("kernel_size", kernel_size), ("stride", stride), ("padding", padding),
            ("dilation", dilation), ("ceil_mode", ceil_mode))


def _unbatched(fn, x, *args, **kwargs):
    out = fn(x.unsqueeze(0), *args, **kwargs)
    if isinstance(out, tuple):
        return tuple(t.squeeze(0) for t in out)
    return out.squeeze(0)


# ---- max pooling ------------------------------------------------------------------------------


@register
class MaxPool2d(Op):
    name = "max_pool2d"
    spec = Spec(samples.POOL2D, tol=EXACT, kinks="distinct", zero_ties=True,
                second_order=True, params={"kind": "max"})

    @staticmethod
    def forward(b, x, **p):
        return b.max_pool2d(x, p["kernel_size"], p["stride"], p["padding"], p["dilation"],
                            p["ceil_mode"])[0]

    @staticmethod
    def backward(node, grad):
        p = node.params
        if not mode.enabled and not amp.on:  # first order: the backend call on the buffers
            b = grad._backend
            return Tensor._make(b.max_pool2d_grad(
                grad._data, p["indices"]._data, node.shapes[0], p["kernel_size"], p["stride"],
                p["padding"], p["dilation"], p["ceil_mode"]), b)
        return _max_pool_grad(grad, p["indices"], node.shapes[0], p)


@register
class MaxPool2dGrad(Op):
    """The gradient of max pooling: grad_output sent to the saved argmax positions."""

    name = "max_pool2d_grad"
    spec = Spec(samples.POOL2D, tol=SCALED,
                params={"kind": "max_grad"})

    @staticmethod
    def forward(b, grad_output, *, indices, input_shape, kernel_size, stride, padding,
                dilation, ceil_mode):
        return b.max_pool2d_grad(grad_output, indices._data, input_shape, kernel_size, stride,
                                 padding, dilation, ceil_mode)

    @staticmethod
    def backward(node, grad):
        n, c, h, w = node.params["input_shape"]
        indices = node.params["indices"]
        oh, ow = indices.shape[2], indices.shape[3]
        picked = gather(grad.reshape(n, c, h * w), 2, indices.reshape(n, c, oh * ow))
        return picked.reshape(n, c, oh, ow)


def _max_pool_grad(grad: Tensor, indices: Tensor, input_shape: tuple, p: dict) -> Tensor:
    params = {k: p[k] for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")}
    params.update(indices=indices, input_shape=tuple(input_shape))
    return nary(MaxPool2dGrad, [grad], **params)


@implements(MaxPool2dGrad)
def max_pool2d_grad(grad_output: Tensor, indices: Tensor, input_shape: tuple, kernel_size,
                    stride=None, padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:
    """The gradient of max pooling for an input of `input_shape`, given the output's gradient
    and the indices `max_pool2d(..., return_indices=True)` returned."""
    template = Tensor._make(grad_output._backend.empty(tuple(input_shape), grad_output.dtype),
                            grad_output._backend)
    p = pool_params(template, kernel_size, stride, padding, dilation, ceil_mode,
                    "max_pool2d_grad")
    if indices.shape != grad_output.shape or indices.dtype.kind not in "iu":
        raise ShapeError(f"max_pool2d_grad: indices of shape {indices.shape} ({indices.dtype}) "
                         f"do not fit grad_output of shape {grad_output.shape}")
    return _max_pool_grad(grad_output, indices.long(), input_shape, p)


@implements(MaxPool2d)
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over each window of input (N, C, H, W) or (C, H, W); with `return_indices`, also
    the int64 index `h * W + w` of each window's first maximum in its input plane.

    >>> import ndlite
    >>> x = ndlite.arange(16.0).reshape(1, 1, 4, 4)
    >>> ndlite.nn.functional.max_pool2d(x, 2).flatten().tolist()
    [5.0, 7.0, 13.0, 15.0]
    """
    if input.ndim == 3:
        return _unbatched(max_pool2d, input, kernel_size, stride, padding, dilation, ceil_mode,
                          return_indices)
    _check_input(input, "max_pool2d")
    p = pool_params(input, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")
    b = input._backend
    values, indices = b.max_pool2d(input._data, p["kernel_size"], p["stride"], p["padding"],
                                   p["dilation"], p["ceil_mode"])
    index = Tensor._make(indices, b)
    out = apply(MaxPool2d, (input,), values, b, {**p, "indices": index})
    return (out, index) if return_indices else out


# ---- average pooling --------------------------------------------------------------------------


def _avg_args(p: dict) -> tuple:
    return (p["kernel_size"], p["stride"], p["padding"], p["ceil_mode"],
            p["count_include_pad"])


@register
class AvgPool2d(Op):
    name = "avg_pool2d"
    spec = Spec(samples.POOL2D, tol=SCALED,
                second_order=True, params={"kind": "avg"})

    @staticmethod
    def forward(b, x, **p):
        return b.avg_pool2d(x, *_avg_args(p))

    @staticmethod
    def backward(node, grad):
        return _unary(AvgPool2dGrad, grad, {**node.params, "input_shape": node.shapes[0]})


@register
class AvgPool2dGrad(Op):
    """The adjoint of average pooling (its gradient); average pooling is the adjoint back."""

    name = "avg_pool2d_grad"
    spec = Spec(samples.POOL2D, tol=SCALED,
                params={"kind": "avg_grad"})

    @staticmethod
    def forward(b, grad_output, **p):
        return b.avg_pool2d_grad(grad_output, p["input_shape"], *_avg_args(p))

    @staticmethod
    def backward(node, grad):
        p = {k: v for k, v in node.params.items() if k != "input_shape"}
        return _unary(AvgPool2d, grad, p)


def _unary(op, x: Tensor, params: dict) -> Tensor:
    return nary(op, [x], **params)


@implements(AvgPool2dGrad)
def avg_pool2d_grad(grad_output: Tensor, input_shape: tuple, kernel_size, stride=None,
                    padding=0, ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """The gradient of average pooling for an input of `input_shape` (the adjoint of
    avg_pool2d), given the output's gradient."""
    template = Tensor._make(grad_output._backend.empty(tuple(input_shape), grad_output.dtype),
                            grad_output._backend)
    p = pool_params(template, kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d_grad")
    del p["dilation"]
    p.update(count_include_pad=bool(count_include_pad), input_shape=tuple(input_shape))
    return _unary(AvgPool2dGrad, grad_output, p)


@implements(AvgPool2d)
def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """Mean over each window of input (N, C, H, W) or (C, H, W). With `count_include_pad` the
    zero padding counts in each window's size (PyTorch's default).

    >>> import ndlite
    >>> x = ndlite.arange(16.0).reshape(1, 1, 4, 4)
    >>> ndlite.nn.functional.avg_pool2d(x, 2).flatten().tolist()
    [2.5, 4.5, 10.5, 12.5]
    """
    if divisor_override is not None:
        # each window's sum divided by divisor_override: the mean over the whole window (its
        # padding counted) times its size; windows cut short by ceil_mode would need their own
        # sizes, which PyTorch's counting rules make another function
        if ceil_mode:
            raise ValueError("avg_pool2d: divisor_override with ceil_mode=True is not "
                             "supported by ndlite")
        if not divisor_override:
            raise ValueError("avg_pool2d: divisor_override must be non-zero")
        kh, kw = pair(kernel_size, "kernel_size", "avg_pool2d")
        mean = avg_pool2d(input, kernel_size, stride, padding, False, True)
        return mean * (kh * kw / float(divisor_override))
    if input.ndim == 3:
        return _unbatched(avg_pool2d, input, kernel_size, stride, padding, ceil_mode,
                          count_include_pad)
    _check_input(input, "avg_pool2d")
    p = pool_params(input, kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d")
    del p["dilation"]
    p["count_include_pad"] = bool(count_include_pad)
    return _unary(AvgPool2d, input, p)


# ---- adaptive average pooling -----------------------------------------------------------------


def _averaging_matrix(size: int, out: int) -> np.ndarray:
    """(out, size): row i averages PyTorch's adaptive window [floor(i*size/out),
    ceil((i+1)*size/out))."""
    m = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed output size (an int, a pair; None keeps that dim).

    >>> import ndlite
    >>> ndlite.nn.functional.adaptive_avg_pool2d(ndlite.ones(2, 3, 7, 5), 1).shape
    (2, 3, 1, 1)
    """
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_avg_pool2d: expected a 3-D or 4-D input, got shape "
                         f"{input.shape}")
    if not is_floating(input.dtype):
        raise DTypeError(f"adaptive_avg_pool2d: expected a floating input, got {input.dtype}")
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size, output_size)
    h, w = input.shape[-2:]
    oh, ow = (h if output_size[0] is None else output_size[0],
              w if output_size[1] is None else output_size[1])
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"adaptive_avg_pool2d: output size must be positive, got {(oh, ow)}")
    rows = _averaging(h, oh, False, input.dtype, input._backend)
    cols = _averaging(w, ow, True, input.dtype, input._backend)
    return rows @ input @ cols


_AVERAGING: dict = {}  # (size, out, transposed, dtype, backend) -> constant tensor


def _averaging(size: int, out: int, transposed: bool, dtype, backend) -> Tensor:
    """The averaging matrix (transposed for the columns) as a tensor on `backend`, made once:
    a constant that nothing writes, so a training step does not copy it to the device each
    time."""
    key = (size, out, transposed, dtype, backend)
    t = _AVERAGING.get(key)
    if t is None:
        m = _averaging_matrix(size, out)
        t = tensor(m.T if transposed else m, dtype=dtype, backend=backend)
        if len(_AVERAGING) < 256:
            _AVERAGING[key] = t
    return t


declare("adaptive_avg_pool2d", Spec(samples.ADAPTIVE_POOL2D), adaptive_avg_pool2d)
