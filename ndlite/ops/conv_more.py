"""1-D convolution and transposed convolutions, composed from the ops of ndlite/ops/conv.py.

conv1d is conv2d over a unit height, so each backend's conv2d fast paths do the work.
conv_transpose2d is the adjoint of conv2d in its input: its forward is conv2d's input
gradient Gi(x, w) over the output's shape, and the op Conv2dGradInput already differentiates
itself with the two others (the gradient wrt the input is conv2d(g, w), the one wrt the
weight conv2d's weight gradient Gw(g, x) with the roles of input and output swapped), so the
gradients of every order come from there. PyTorch's weight layout (in, out / groups, kh, kw)
is conv2d's (out, in / groups, kh, kw) read from the other side: no copy is needed.
"""

from __future__ import annotations

import numbers

from ..creation import zeros
from ..device.fallbacks import conv_output_size
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .autocast import autocast_op
from .conv import check_ranks, conv2d, conv2d_grad_input, pair, positive
from .join import pad
from .registry import Spec, declare
from .samples import Sampler

CONV1D = Sampler("conv1d", "input (N, C, L) or (C, L), weight (O, C / groups, k), bias and "
                           "geometry of a 1-d convolution (padding an int, 'same' or 'valid')")
CONV_TRANSPOSE = Sampler("conv_transpose", "input, weight (in, out / groups, k...), bias and "
                                           "geometry (stride, padding, output_padding, groups, "
                                           "dilation) of a transposed convolution; "
                                           "params['dims'] is 1 or 2")


def single(value, name: str, op: str) -> int:
    """An int or a 1-tuple of an int, as an int (PyTorch's _single)."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"{op}: {name} must be an int or a 1-tuple of an int, got {value!r}")


def _check_dtypes(op: str, tensors: list) -> None:
    for t in tensors:
        if not is_floating(t.dtype) or t.dtype != tensors[0].dtype:
            raise DTypeError(f"{op}: input, weight and bias must share one floating dtype, got "
                             f"{[str(t.dtype) for t in tensors]}")


def _check_groups(op: str, groups) -> int:
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups <= 0:
        raise ValueError(f"{op}: groups must be a positive integer, got {groups!r}")
    return int(groups)


@autocast_op("conv1d")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D convolution (cross-correlation) of input (N, C, L) or (C, L) with weight
    (O, C // groups, k), plus bias (O,); `padding` is an int, 'valid' or 'same'.

    >>> import ndlite
    >>> x, w = ndlite.ones(1, 2, 5), ndlite.ones(3, 2, 3)
    >>> ndlite.nn.functional.conv1d(x, w, padding="same").shape
    (1, 3, 5)
    """
    op = "conv1d"
    if input.ndim == 2:
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation,
                      groups).squeeze(0)
    check_ranks(op, input, weight, 1, "out_channels, in_channels / groups, kernel")
    _check_dtypes(op, [input, weight] + ([bias] if bias is not None else []))
    groups = _check_groups(op, groups)
    stride = positive((single(stride, "stride", op),), "stride", op)[0]
    dilation = positive((single(dilation, "dilation", op),), "dilation", op)[0]
    o, cg, k = weight.shape
    if o % groups:
        raise ShapeError(f"{op}: out_channels {o} (weight shape {weight.shape}) must be "
                         f"divisible by groups={groups}")
    if input.shape[1] != cg * groups:
        raise ShapeError(f"{op}: input of shape {input.shape} has {input.shape[1]} channels, "
                         f"but weight of shape {weight.shape} with groups={groups} expects "
                         f"{cg * groups}")
    if bias is not None and bias.shape != (o,):
        raise ShapeError(f"{op}: bias must have shape ({o},), got {bias.shape}")
    if isinstance(padding, str):
        if padding == "same" and stride != 1:
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions "
                             f"(stride {stride})")
        if padding not in ("same", "valid"):
            raise ValueError(f"{op}: padding must be an int, 'valid' or 'same', got "
                             f"{padding!r}")
        pad2 = padding
    else:
        pad2 = (0, single(padding, "padding", op))
        if pad2[1] < 0:
            raise ValueError(f"{op}: padding must be non-negative, got {pad2[1]}")
    span, length = dilation * (k - 1) + 1, input.shape[2] + (0 if isinstance(pad2, str)
                                                              else 2 * pad2[1])
    if pad2 != "same" and span > length:
        raise ShapeError(f"{op}: the kernel {k} with dilation {dilation} spans {span}, larger "
                         f"than the padded input length {length} (input shape {input.shape})")
    out = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, stride), pad2,
                 (1, dilation), groups)
    return out.squeeze(2)


@autocast_op("conv_transpose2d")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-D transposed convolution of input (N, C_in, H, W) or (C_in, H, W) with weight
    (C_in, C_out // groups, kh, kw), plus bias (C_out,): the gradient of conv2d with respect
    to its input. Output size (H - 1) * stride - 2 * padding + dilation * (kh - 1) +
    output_padding + 1.

    >>> import ndlite
    >>> x, w = ndlite.ones(1, 2, 3, 3), ndlite.ones(2, 4, 3, 3)
    >>> ndlite.nn.functional.conv_transpose2d(x, w, stride=2, padding=1,
    ...                                       output_padding=1).shape
    (1, 4, 6, 6)
    """
    op = "conv_transpose2d"
    if input.ndim == 3:
        return conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding, groups, dilation).squeeze(0)
    check_ranks(op, input, weight, 2, "in_channels, out_channels / groups, kh, kw")
    return _conv_transpose(op, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def _conv_transpose(op: str, input: Tensor, weight: Tensor, bias, stride, padding,
                    output_padding, groups, dilation) -> Tensor:
    """conv_transpose2d of a 4-D input and weight; errors name `op`."""
    tensors = [input, weight] + ([bias] if bias is not None else [])
    _check_dtypes(op, tensors)
    groups = _check_groups(op, groups)
    stride, padding, output_padding, dilation = _transpose_geometry(
        op, stride, padding, output_padding, dilation)
    c_in, cg_out, kh, kw = weight.shape
    if input.shape[1] != c_in:
        raise ShapeError(f"{op}: input of shape {input.shape} has {input.shape[1]} channels, "
                         f"but weight of shape {weight.shape} expects {c_in}")
    if c_in % groups:
        raise ShapeError(f"{op}: in_channels {c_in} (weight shape {weight.shape}) must be "
                         f"divisible by groups={groups}")
    c_out = cg_out * groups
    if bias is not None and bias.shape != (c_out,):
        raise ShapeError(f"{op}: bias must have shape ({c_out},), got {bias.shape}")
    size = tuple((n - 1) * s - 2 * p + d * (k - 1) + q + 1 for n, s, p, d, k, q in zip(
        input.shape[2:], stride, padding, dilation, (kh, kw), output_padding, strict=True))
    if min(size) <= 0:
        raise ShapeError(f"{op}: the output size {size} is not positive (input shape "
                         f"{input.shape}, weight {weight.shape}, stride {stride}, padding "
                         f"{padding}, dilation {dilation}, output_padding {output_padding})")
    out_shape = (input.shape[0], c_out) + size
    if input.numel() == 0 or weight.numel() == 0:
        out = zeros(out_shape, dtype=input.dtype, backend=input.backend) + \
            (input.sum() + weight.sum()) * 0
    else:
        out = conv2d_grad_input(_fit(input, size, (kh, kw), stride, padding, dilation), weight,
                                out_shape, stride, padding, dilation, groups)
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


def _transpose_geometry(op: str, stride, padding, output_padding, dilation) -> tuple:
    """The (h, w) pairs of a transposed convolution, checked as PyTorch checks them."""
    stride = positive(pair(stride, "stride", op), "stride", op)
    dilation = positive(pair(dilation, "dilation", op), "dilation", op)
    padding = pair(padding, "padding", op)
    output_padding = pair(output_padding, "output_padding", op)
    if min(padding) < 0 or min(output_padding) < 0:
        raise ValueError(f"{op}: padding {padding} and output_padding {output_padding} must be "
                         f"non-negative")
    for extra, s, d in zip(output_padding, stride, dilation, strict=True):
        if extra >= max(s, d):
            raise ValueError(f"{op}: output_padding {output_padding} must be smaller than either "
                             f"stride {stride} or dilation {dilation}")
    return stride, padding, output_padding, dilation


def _fit(input: Tensor, size, kernel, stride, padding, dilation) -> Tensor:
    """The input padded at the end with zeros to the output size conv2d gives over `size`:
    larger than the input only when output_padding >= stride (allowed below the dilation),
    where conv2d over the output has windows the transposed input does not reach."""
    extra = [conv_output_size(n, k, s, p, d) - m for n, k, s, p, d, m in zip(
        size, kernel, stride, padding, dilation, input.shape[2:], strict=True)]
    if max(extra) == 0:
        return input
    return pad(input, (0, extra[1], 0, extra[0]))


@autocast_op("conv_transpose1d")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-D transposed convolution of input (N, C_in, L) or (C_in, L) with weight
    (C_in, C_out // groups, k): conv_transpose2d over a unit height.

    >>> import ndlite
    >>> x, w = ndlite.ones(1, 2, 4), ndlite.ones(2, 3, 3)
    >>> ndlite.nn.functional.conv_transpose1d(x, w, stride=2).shape
    (1, 3, 9)
    """
    op = "conv_transpose1d"
    if input.ndim == 2:
        return conv_transpose1d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding, groups, dilation).squeeze(0)
    check_ranks(op, input, weight, 1, "in_channels, out_channels / groups, kernel")
    geometry = [(1, single(v, name, op)) for v, name in (
        (stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
        (dilation, "dilation"))]
    geometry[1] = (0, geometry[1][1])
    geometry[2] = (0, geometry[2][1])
    out = _conv_transpose(op, input.unsqueeze(2), weight.unsqueeze(2), bias, geometry[0],
                          geometry[1], geometry[2], groups, geometry[3])
    return out.squeeze(2)


declare("conv1d", Spec(CONV1D, second_order=True), conv1d)
declare("conv_transpose2d", Spec(CONV_TRANSPOSE, second_order=True, params={"dims": 2}),
        conv_transpose2d)
declare("conv_transpose1d", Spec(CONV_TRANSPOSE, second_order=True, params={"dims": 1}),
        conv_transpose1d)
