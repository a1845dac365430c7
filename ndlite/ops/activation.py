"""Activations: log_softmax, softmax, leaky_relu, gelu, and dropout (relu, sigmoid and tanh
are elementwise ops). log_softmax runs on the backend's fast path (protocol.py)."""

from __future__ import annotations

import math
import numbers

from ..amp_state import switch as amp
from ..creation import generator, manual_seed
from ..dtypes import HALF, is_floating
from ..errors import DTypeError
from ..graph import mode
from ..tensor import Tensor, _dim
from . import samples
from .cast import forward_in_float32
from .dispatch import unary
from .elementwise import where
from .registry import TRANSCENDENTAL, Op, Spec, declare, implements, register
from .unary import exp


def _float_input(x: Tensor, op: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if not is_floating(x.dtype):
        raise DTypeError(f"{op}: expected a floating tensor, got {x.dtype} (shape {x.shape})")


def _softmax_axis(x: Tensor, dim, op: str) -> int:
    if dim is None:  # PyTorch's legacy implicit choice
        dim = 0 if x.ndim in (0, 1, 3) else 1
    return _dim(dim, x.ndim, op)


@register
class LogSoftmax(Op):
    name = "log_softmax"
    spec = Spec(samples.SOFTMAX, tol=TRANSCENDENTAL,
                second_order=True)
    save_output = True

    @staticmethod
    def forward(b, x, axis):
        if not x.shape:
            return b.sub(x, x)  # a 0-d tensor: log(1)
        return b.log_softmax(x, axis)

    @staticmethod
    def backward(node, grad):
        if not node.shapes[0]:
            return grad * 0
        axis = node.params["axis"]
        b, out = grad._backend, node.out_data
        if not mode.enabled and not amp.on and node.backend is b and grad._data.dtype == out.dtype:
            # first order: one backend call on the buffers (its fallback: the backend calls
            # of the line below, exp, sum, mul, sub, in that order), without four tensor ops
            return Tensor._make(b.log_softmax_grad(grad._data, out, axis), b)
        return grad - exp(node.output()) * grad.sum(axis, keepdim=True)


@implements(LogSoftmax)
def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """log(softmax(x)) along `dim`, computed without overflow.

    >>> import ndlite
    >>> ndlite.nn.functional.log_softmax(ndlite.tensor([0.0, 0.0]), dim=0).exp().tolist()
    [0.5, 0.5]
    """
    _float_input(input, "log_softmax")
    if dtype is not None:
        input = input.to(dtype)
    axis = _softmax_axis(input, dim, "log_softmax")
    if input.numel() == 0:  # nothing to normalize (PyTorch returns the empty tensor)
        return input + 0.0
    return unary(LogSoftmax, input, axis=axis)


@register
class Softmax(Op):
    name = "softmax"
    spec = Spec(samples.SOFTMAX, tol=TRANSCENDENTAL,
                second_order=True)
    save_output = True

    @staticmethod
    @forward_in_float32  # exp of a log_softmax rounded to half would lose ulps
    def forward(b, x, axis):
        if not x.shape:
            return b.add(b.sub(x, x), 1)
        return b.exp(b.log_softmax(x, axis))

    @staticmethod
    def backward(node, grad):
        if not node.shapes[0]:
            return grad * 0
        out = node.output()
        return out * (grad - (grad * out).sum(node.params["axis"], keepdim=True))


@implements(Softmax)
def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`.

    >>> import ndlite
    >>> ndlite.nn.functional.softmax(ndlite.tensor([1.0, 1.0, 1.0, 1.0]), dim=0).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    _float_input(input, "softmax")
    if dtype is not None:
        input = input.to(dtype)
    axis = _softmax_axis(input, dim, "softmax")
    if input.numel() == 0:  # nothing to normalize (PyTorch returns the empty tensor)
        return input + 0.0
    return unary(Softmax, input, axis=axis)


@register
class LeakyRelu(Op):
    name = "leaky_relu"
    spec = Spec(samples.UNARY, kinks="zero",
                params={"negative_slope": 0.1})
    save_inputs = True

    @staticmethod
    def forward(b, x, negative_slope):
        return b.where(b.gt(x, 0), x, b.mul(x, negative_slope))

    @staticmethod
    def backward(node, grad):
        return where(node.saved[0] > 0, grad, grad * node.params["negative_slope"])


@implements(LeakyRelu)
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x.

    >>> import ndlite
    >>> ndlite.nn.functional.leaky_relu(ndlite.tensor([-2.0, 3.0]), 0.5).tolist()
    [-1.0, 3.0]
    """
    _float_input(input, "leaky_relu")
    return unary(LeakyRelu, input, negative_slope=float(negative_slope))


@register
class Erf(Op):
    name = "erf"
    spec = Spec(samples.UNARY, tol=TRANSCENDENTAL,
                domain=(-3.0, 3.0))
    save_inputs = True

    @staticmethod
    def forward(b, x):
        return b.erf(x)

    @staticmethod
    def backward(node, grad):
        x = node.saved[0]
        return grad * exp(x * x * -1.0) * (2.0 / math.sqrt(math.pi))


@implements(Erf)
def erf(x: Tensor) -> Tensor:
    """The error function, accurate to float64 (a backend primitive).

    >>> import ndlite
    >>> round(ndlite.ops.activation.erf(ndlite.tensor([0.5])).item(), 6)
    0.5205
    """
    _float_input(x, "erf")
    return unary(Erf, x)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@register
class Gelu(Op):
    name = "gelu"
    spec = Spec(samples.GELU, tol=TRANSCENDENTAL,
                domain=(-4.0, 4.0), second_order=True)
    save_inputs = True

    # The tanh form 0.5 x (1 + tanh(z)) is computed as x * sigmoid(2 z): the same function, but
    # 1 + tanh(z) and 1 - tanh(z)^2 cancel in float32 where tanh(z) is near -1, while
    # sigmoid(2 z) and sigmoid(2 z) sigmoid(-2 z) = (1 - tanh(z)^2) / 4 do not.

    @staticmethod
    @forward_in_float32  # in half, 1 + erf(x / sqrt 2) cancels to 0 below x = -3
    def forward(b, x, approximate):
        return b.gelu(x, approximate)  # a fast path; the fallback composes the formula

    @staticmethod
    def backward(node, grad):
        x = node.saved[0]
        if x.dtype in HALF:  # as the forward: the cancelling sums in float32, rounded once
            return Gelu.backward_of(x.float(), grad.float(), node.params).to(x.dtype)
        if not mode.enabled:  # first order: the backend's fused gelu_grad
            b = x._backend
            return Tensor._make(b.gelu_grad(grad._data, x._data, node.params["approximate"]), b)
        return Gelu.backward_of(x, grad, node.params)

    @staticmethod
    def backward_of(x, grad, params):
        if params["approximate"] == "tanh":
            z2 = (x + x * x * x * 0.044715) * (2 * _SQRT_2_OVER_PI)
            s, s_neg = z2.sigmoid(), (-z2).sigmoid()
            d_z2 = (1 + x * x * (3 * 0.044715)) * (2 * _SQRT_2_OVER_PI)
            return grad * (s + x * s * s_neg * d_z2)
        cdf = (erf(x * _INV_SQRT_2) + 1) * 0.5
        pdf = exp(x * x * -0.5) * _INV_SQRT_2PI
        return grad * (cdf + x * pdf)


@implements(Gelu)
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x), Phi the standard normal CDF; `approximate='tanh'` uses PyTorch's tanh
    formula; 'none' is exact to the accuracy of erf (float64's).

    >>> import ndlite
    >>> round(ndlite.nn.functional.gelu(ndlite.tensor([1.0])).item(), 4)
    0.8413
    """
    _float_input(input, "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return unary(Gelu, input, approximate=approximate)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes each element with probability `p` and scales the rest by 1 / (1 - p) while
    training; the identity in eval mode. The mask is drawn on the device from one seed of
    ndlite's host generator (`ndlite.manual_seed`), so a seed gives the same mask on every
    backend.

    >>> import ndlite
    >>> ndlite.nn.functional.dropout(ndlite.ones(4), 0.5, training=False).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    _float_input(input, "dropout")
    if not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability must be between 0 and 1, got {p!r}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    # one 63-bit seed from the host generator; the backend draws the mask from it where the
    # data lives (a counter-based hash, the same bits on every backend: protocol.dropout_mask)
    seed = int(generator().integers(0, 2**63))
    if input.dtype in HALF:  # the mask is drawn on the host for halves: once, and kept
        b = input._backend
        return input * Tensor._make(b.dropout_mask(input.shape, float(p), seed, input.dtype), b)
    return unary(Dropout, input, p=float(p), seed=seed)


class Dropout(Op):
    """x * mask, the mask drawn from `seed` where the data lives (protocol.dropout_mask): one
    fused backend call, and no mask kept for the backward, which applies the same mask to the
    gradient, drawn again from the seed (the same bits as x * mask and grad * mask, composed;
    the attention weights' masks of the character GPT were 100 MB a layer)."""

    name = "dropout_masked"  # not in the registry: tested through the functional "dropout"

    @staticmethod
    def forward(b, x, p, seed):
        return b.dropout(x, p, seed)

    @staticmethod
    def backward(node, grad):
        return unary(Dropout, grad, p=node.params["p"], seed=node.params["seed"])


def _seeded_dropout(x, p: float, seed: int, training: bool = True):
    """The spec's call: dropout with the generator reseeded first, so repeated calls
    (gradchecks, two backends) draw the same mask."""
    manual_seed(seed)
    return dropout(x, p, training)


declare("dropout", Spec(samples.DROPOUT, call=_seeded_dropout), dropout)
