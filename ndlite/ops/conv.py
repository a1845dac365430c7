"""2-D convolution: conv2d and its two gradients, each an op, so gradients of gradients work.

conv2d is bilinear in (input, weight). Writing C(x, w) for it, Gi(g, w) for its input
gradient and Gw(x, g) for its weight gradient, the identities
    <C(x, w), g> = <x, Gi(g, w)> = <w, Gw(x, g)>
give every backward below: each of the three ops is differentiated with the other two.
The computing is done by the backend's fast paths (protocol.py; fallback im2col + matmul).
"""

from __future__ import annotations

import numbers

from ..amp_state import switch as amp
from ..creation import zeros
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..graph import mode
from ..tensor import Tensor
from . import samples
from .autocast import autocast_inputs
from .dispatch import nary
from .join import pad
from .registry import SCALED, Op, Spec, implements, register
from .unary import _relu_grad, relu


def pair(value, name: str, op: str) -> tuple:
    """An int or a pair of ints as an (h, w) pair."""
    kind = value.__class__
    if kind is int:  # the common cases first: no abc instance checks
        return (value, value)
    if kind is tuple and len(value) == 2 and value[0].__class__ is int and \
            value[1].__class__ is int:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (int(value), int(value))
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        return (int(value[0]), int(value[1]))
    raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")


def positive(value: tuple, name: str, op: str) -> tuple:
    if min(value) <= 0:
        raise ValueError(f"{op}: {name} must be positive, got {value}")
    return value


def _apply(op, inputs, params):
    return nary(op, list(inputs), **params)


def _geometry(p: dict) -> dict:
    return {k: p[k] for k in ("stride", "padding", "dilation", "groups")}


@register
class Conv2d(Op):
    name = "conv2d"
    spec = Spec(samples.CONV2D, tol=SCALED, second_order=True)
    save_inputs = True

    @staticmethod
    def forward(b, x, weight, bias=None, *, stride, padding, dilation, groups):
        if bias is not None:  # one call: the bias added as the output is written, or after
            return b.conv2d_bias(x, weight, bias, stride, padding, dilation, groups)
        return b.conv2d(x, weight, stride, padding, dilation, groups)

    @staticmethod
    def backward(node, grad):
        x, weight = node.saved[0], node.saved[1]
        b = grad._backend
        if not mode.enabled and not amp.on and x._backend is b and weight._backend is b:
            return _first_order(node, grad._data, x, weight, b)
        p = _geometry(node.params)
        grads = [None] * len(node.next)
        if node.next[0] is not None:
            grads[0] = _grad_input(grad, weight, x.shape, p)
        if node.next[1] is not None:
            grads[1] = _grad_weight(x, grad, weight.shape, p)
        if len(node.next) > 2 and node.next[2] is not None:
            grads[2] = grad.sum((0, 2, 3))
        return tuple(grads)


class Conv2dReLU(Conv2d):
    """relu(conv2d(x, weight) + bias): a Conv2d layer with a bias and the ReLU after it in a
    Sequential (nn/container.py), one backend call (conv2d_bias with relu) and one graph node
    where the two ops made two calls at least and two nodes; the same bits both ways. Its
    backward is ReLU's mask, then Conv2d's. Not in the kit's registry: it is two registered
    ops composed (a gradcheck would need its pre-activations kept off 0), and
    tests/nn/test_fused_layers.py holds it to their bits, values and gradients."""

    name = "conv2d_relu"
    save_output = True

    @staticmethod
    def forward(b, x, weight, bias, *, stride, padding, dilation, groups):
        return b.conv2d_bias(x, weight, bias, stride, padding, dilation, groups, True)

    @staticmethod
    def backward(node, grad):
        return Conv2d.backward(node, _relu_grad(node, grad))


def _first_order(node, g, x: Tensor, weight: Tensor, b) -> tuple:
    """conv2d's gradients outside create_graph: the backend calls of the gradient ops
    (conv2d_grad_input, conv2d_grad_weight, the bias's sum over (0, 2, 3)) on the buffers,
    without a tensor op each."""
    p = node.params
    geometry = (p["stride"], p["padding"], p["dilation"], p["groups"])
    grads = [None] * len(node.next)
    if node.next[0] is not None:
        grads[0] = Tensor._make(b.conv2d_grad_input(g, weight._data, x.shape, *geometry), b)
    if node.next[1] is not None:
        grads[1] = Tensor._make(b.conv2d_grad_weight(x._data, g, weight.shape, *geometry), b)
    if len(node.next) > 2 and node.next[2] is not None:
        grads[2] = Tensor._make(b.sum(g, (0, 2, 3), False), b)
    return tuple(grads)


@register
class Conv2dGradInput(Op):
    """Gi(g, w): the gradient of conv2d with respect to its input."""

    name = "conv2d_grad_input"
    spec = Spec(samples.CONV2D_GRAD, tol=SCALED,
                params={"which": "input"})
    save_inputs = True

    @staticmethod
    def forward(b, grad_output, weight, *, input_shape, stride, padding, dilation, groups):
        return b.conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation,
                                   groups)

    @staticmethod
    def backward(node, grad):
        grad_output, weight = node.saved
        p = _geometry(node.params)
        g_out = g_w = None
        if node.next[0] is not None:  # <Gi(g, w), gg> = <C(gg, w), g>
            g_out = _apply(Conv2d, [grad, weight], p)
        if node.next[1] is not None:  # ... = <w, Gw(gg, g)>
            g_w = _grad_weight(grad, grad_output, weight.shape, p)
        return g_out, g_w


@register
class Conv2dGradWeight(Op):
    """Gw(x, g): the gradient of conv2d with respect to its weight."""

    name = "conv2d_grad_weight"
    spec = Spec(samples.CONV2D_GRAD, tol=SCALED,
                params={"which": "weight"})
    save_inputs = True

    @staticmethod
    def forward(b, x, grad_output, *, weight_shape, stride, padding, dilation, groups):
        return b.conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation,
                                    groups)

    @staticmethod
    def backward(node, grad):
        x, grad_output = node.saved
        p = _geometry(node.params)
        g_x = g_out = None
        if node.next[0] is not None:  # <Gw(x, g), gw> = <x, Gi(g, gw)>
            g_x = _grad_input(grad_output, grad, x.shape, p)
        if node.next[1] is not None:  # ... = <C(x, gw), g>
            g_out = _apply(Conv2d, [x, grad], p)
        return g_x, g_out


def _grad_input(grad_output: Tensor, weight: Tensor, input_shape: tuple, geometry: dict):
    """conv2d_grad_input with a geometry already checked (a node's params): backward passes
    skip the public function's checks."""
    return nary(Conv2dGradInput, [grad_output, weight], input_shape=input_shape, **geometry)


def _grad_weight(x: Tensor, grad_output: Tensor, weight_shape: tuple, geometry: dict):
    """conv2d_grad_weight with a geometry already checked (see _grad_input)."""
    return nary(Conv2dGradWeight, [x, grad_output], weight_shape=weight_shape, **geometry)


@implements(Conv2dGradInput)
def conv2d_grad_input(grad_output: Tensor, weight: Tensor, input_shape: tuple, stride=(1, 1),
                      padding=(0, 0), dilation=(1, 1), groups: int = 1) -> Tensor:
    """The gradient of `conv2d(x, weight)` with respect to an x of `input_shape`, given the
    output's gradient (geometry as (h, w) pairs; symmetric padding)."""
    p = dict(stride=pair(stride, "stride", "conv2d_grad_input"),
             padding=pair(padding, "padding", "conv2d_grad_input"),
             dilation=pair(dilation, "dilation", "conv2d_grad_input"), groups=int(groups))
    return _apply(Conv2dGradInput, [grad_output, weight],
                  {"input_shape": tuple(input_shape), **p})


@implements(Conv2dGradWeight)
def conv2d_grad_weight(x: Tensor, grad_output: Tensor, weight_shape: tuple, stride=(1, 1),
                       padding=(0, 0), dilation=(1, 1), groups: int = 1) -> Tensor:
    """The gradient of `conv2d(x, weight)` with respect to a weight of `weight_shape`."""
    p = dict(stride=pair(stride, "stride", "conv2d_grad_weight"),
             padding=pair(padding, "padding", "conv2d_grad_weight"),
             dilation=pair(dilation, "dilation", "conv2d_grad_weight"), groups=int(groups))
    return _apply(Conv2dGradWeight, [x, grad_output], {"weight_shape": tuple(weight_shape), **p})


def _same_padding(kernel: tuple, dilation: tuple) -> list:
    """(before, after) per dim: PyTorch's 'same' puts the odd extra element after."""
    out = []
    for k, d in zip(kernel, dilation, strict=True):
        total = d * (k - 1)
        out.append((total // 2, total - total // 2))
    return out


def _padding_widths(padding, stride, dilation, kernel, op: str) -> list:
    """(before, after) padding per spatial dim for an int, a pair, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0), (0, 0)]
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(f"{op}: padding='same' is not supported for strided "
                                 f"convolutions (stride {stride})")
            return _same_padding(kernel, dilation)
        raise ValueError(f"{op}: padding must be an int, a pair, 'valid' or 'same', got "
                         f"{padding!r}")
    ph, pw = pair(padding, "padding", op)
    if min(ph, pw) < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {(ph, pw)}")
    return [(ph, ph), (pw, pw)]


#: the dims of an unbatched and a batched input, per number of spatial dims
_INPUT_DIMS = {1: ("C, L", "N, C, L"), 2: ("C, H, W", "N, C, H, W")}


def check_ranks(op: str, input: Tensor, weight: Tensor, spatial: int, weight_dims: str) -> None:
    """A batched input and a weight of `spatial` + 2 dims, or the ShapeError of convolution
    `op` (its callers handle an unbatched input first); `weight_dims` names the weight's."""
    unbatched, batched = _INPUT_DIMS[spatial]
    if input.ndim != spatial + 2:
        raise ShapeError(f"{op}: expected a {spatial + 1}-D ({unbatched}) or {spatial + 2}-D "
                         f"({batched}) input, got shape {input.shape}")
    if weight.ndim != spatial + 2:
        raise ShapeError(f"{op}: weight must be {spatial + 2}-D ({weight_dims}), got shape "
                         f"{weight.shape}")


@implements(Conv2d)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of input (N, C, H, W) or (C, H, W) with weight
    (O, C // groups, kh, kw), plus bias (O,). `padding` is an int, a pair, 'valid' or 'same'.

    >>> import ndlite
    >>> x, w = ndlite.ones(1, 1, 4, 4), ndlite.ones(2, 1, 3, 3)
    >>> ndlite.nn.functional.conv2d(x, w, padding=1).shape
    (1, 2, 4, 4)
    """
    return _conv2d(Conv2d, input, weight, bias, stride, padding, dilation, groups)


@implements(Conv2dReLU)
def conv2d_relu(input: Tensor, weight: Tensor, bias: Tensor, stride=1, padding=0, dilation=1,
                groups: int = 1) -> Tensor:
    """relu(conv2d(input, weight, bias, ...)) as one op (Conv2dReLU): what a Sequential runs
    for a Conv2d with a bias followed by a ReLU.

    >>> import ndlite
    >>> x, w = ndlite.ones(1, 1, 3, 3), -ndlite.ones(1, 1, 3, 3)
    >>> conv2d_relu(x, w, ndlite.ones(1)).tolist()
    [[[[0.0]]]]
    """
    return _conv2d(Conv2dReLU, input, weight, bias, stride, padding, dilation, groups)


def _conv2d(kind, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    """conv2d's checks and dispatch, for `kind` Conv2d or Conv2dReLU (whose errors are
    conv2d's: a Sequential runs it for a Conv2d layer)."""
    op = "conv2d"
    if amp.on:  # before the dtype check: autocast casts input, weight and bias
        input, weight, bias = autocast_inputs(Conv2d, (input, weight, bias))
    if input.ndim == 3:
        return _conv2d(kind, input.unsqueeze(0), weight, bias, stride, padding, dilation,
                       groups).squeeze(0)
    check_ranks(op, input, weight, 2, "out_channels, in_channels / groups, kh, kw")
    tensors = [input, weight] + ([bias] if bias is not None else [])
    dtype = input._data.dtype
    for t in tensors:
        if not is_floating(t._data.dtype) or t._data.dtype != dtype:
            raise DTypeError(f"{op}: input, weight and bias must share one floating dtype, got "
                             f"{[str(t.dtype) for t in tensors]}")
    key = (input._data.shape, weight._data.shape, None if bias is None else bias._data.shape,
           stride, padding, dilation, groups)
    params = _GEOMETRY.get(key) if _plain(stride, padding, dilation, groups) else None
    if params is None:
        params = _geometry_of(input, weight, bias, stride, padding, dilation, groups)
        if params.__class__ is not dict:  # asymmetric 'same' padding or an empty operand
            return relu(params) if kind is Conv2dReLU else params
        if _plain(stride, padding, dilation, groups) and len(_GEOMETRY) < 1024:
            _GEOMETRY[key] = params
    return nary(kind, tensors, **params)


#: conv2d's checked geometry per (shapes, stride, padding, dilation, groups), for arguments of
#: plain ints (a training step convolves the same shapes every time; errors are not cached)
_GEOMETRY: dict = {}


def _plain(stride, padding, dilation, groups) -> bool:
    for v in (stride, padding, dilation):
        kind = v.__class__
        if not (kind is int or kind is str or kind is tuple and len(v) == 2 and
                v[0].__class__ is int and v[1].__class__ is int):
            return False
    return groups.__class__ is int


def _geometry_of(input, weight, bias, stride, padding, dilation, groups):
    """conv2d's params (stride, padding, dilation, groups) after its checks, or the result
    itself where the geometry needs more than one convolution (asymmetric 'same' padding,
    empty operands)."""
    op = "conv2d"
    if (groups.__class__ is not int and not isinstance(groups, numbers.Integral)) or groups <= 0:
        raise ValueError(f"{op}: groups must be a positive integer, got {groups!r}")
    stride = positive(pair(stride, "stride", op), "stride", op)
    dilation = positive(pair(dilation, "dilation", op), "dilation", op)
    n, c, h, w = input.shape
    o, cg, kh, kw = weight.shape
    if o % groups:
        raise ShapeError(f"{op}: out_channels {o} (weight shape {weight.shape}) must be "
                         f"divisible by groups={groups}")
    if c != cg * groups:
        raise ShapeError(f"{op}: input of shape {input.shape} has {c} channels, but weight of "
                         f"shape {weight.shape} with groups={groups} expects {cg * groups}")
    if bias is not None and bias.shape != (o,):
        raise ShapeError(f"{op}: bias must have shape ({o},), got {bias.shape}")
    widths = _padding_widths(padding, stride, dilation, (kh, kw), op)
    if any(lo != hi for lo, hi in widths):  # asymmetric 'same': pad explicitly first
        padded = pad(input, (widths[1][0], widths[1][1], widths[0][0], widths[0][1]))
        return conv2d(padded, weight, bias, stride, 0, dilation, groups)
    padded = (h + 2 * widths[0][0], w + 2 * widths[1][0])
    span = (dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1)
    if span[0] > padded[0] or span[1] > padded[1]:
        raise ShapeError(f"{op}: the kernel {(kh, kw)} with dilation {dilation} spans {span}, "
                         f"larger than the padded input {padded} (input shape {input.shape})")
    if input.numel() == 0 or weight.numel() == 0:
        return _empty_conv(input, weight, bias, padded, span, stride)
    return dict(stride=stride, padding=(widths[0][0], widths[1][0]), dilation=dilation,
                groups=int(groups))


def _empty_conv(input: Tensor, weight: Tensor, bias, padded, span, stride) -> Tensor:
    """conv2d where a batch, a channel count or a kernel is empty: every sum is over nothing,
    so the result is 0 (+ bias), and the gradients 0."""
    size = [(padded[i] - span[i]) // stride[i] + 1 for i in (0, 1)]
    shape = (input.shape[0], weight.shape[0], *size)
    out = zeros(shape, dtype=input.dtype, backend=input.backend) + (input.sum() + weight.sum()) * 0
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)
