"""More of PyTorch's activations (`relu6`, `hardswish`, `mish`, `selu`, `prelu`, `glu`, ...),
composed from registered ops, so every backend and every order of derivative. Piecewise ones
are written with `where` on PyTorch's own boundaries, so the gradient at a boundary is
PyTorch's (hardswish's is 0 at -3 and 1 at 3, relu6's 0 at 0 and at 6).
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..tensor import Tensor
from .activation import softmax
from .elementwise import where
from .math import elu, hardtanh, softplus
from .unary import abs as _abs_values
from .unary import sigmoid, tanh

#: SELU's constants (Klambauer et al. 2017), PyTorch's digits
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6) (MobileNet's activation; hardtanh(x, 0, 6) as PyTorch's)."""
    return hardtanh(input, 0.0, 6.0)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """0 below -3, 1 above 3, x / 6 + 1/2 between (gradient 1/6 inside, 0 at the ends).

    >>> import ndlite
    >>> ndlite.nn.functional.hardsigmoid(ndlite.tensor([-4.0, 0.0, 4.0])).tolist()
    [0.0, 0.5, 1.0]
    """
    inside = input / 6.0 + 0.5
    return where(input <= -3.0, 0.0, where(input >= 3.0, 1.0, inside))


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6 (MobileNetV3's activation). The quadratic piece is computed on x
    held inside (-3, 3), so an infinite x gets the gradient 1 (or 0), not 0 * inf = NaN."""
    held = where((input <= -3.0).logical_or(input >= 3.0), 0.0, input)  # (NaN stays NaN)
    inside = held * (held + 3.0) / 6.0
    return where(input <= -3.0, 0.0, where(input >= 3.0, input, inside))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x)) (YOLOv4's activation)."""
    return input * tanh(softplus(input))


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with SELU's self-normalizing constants."""
    return elu(input, SELU_ALPHA) * SELU_SCALE


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return elu(input / alpha, 1.0) * alpha


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (_abs_values(input) + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - tanh(input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between (NaN stays NaN)."""
    between = (input >= -lambd).logical_and(input <= lambd)
    return where(between, 0.0, where(input > lambd, input - lambd, input + lambd))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0 (NaN stays NaN)."""
    return where((input >= -lambd).logical_and(input <= lambd), 0.0, input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else `value` (NaN stays NaN, as PyTorch's)."""
    return where(input <= threshold, value, input)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the two halves a, b of `input` along `dim` (gated linear unit).

    >>> import ndlite
    >>> ndlite.nn.functional.glu(ndlite.tensor([2.0, 0.0])).tolist()
    [1.0]
    """
    n = input.shape[dim] if input.ndim else 0
    if n % 2:
        raise ShapeError(f"glu: halving dim {dim} of shape {input.shape} needs an even size")
    a, b = input.split(n // 2, dim)
    return a * sigmoid(b)


def softmin(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """softmax(-x) along `dim`."""
    return softmax(-input, dim, dtype)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x, the weight one per channel (dim 1; a single weight, or
    an input of fewer than 2 dims, shares it).

    >>> import ndlite
    >>> ndlite.nn.functional.prelu(ndlite.tensor([[-2.0, 3.0]]), ndlite.tensor([0.25])).tolist()
    [[-0.5, 3.0]]
    """
    if weight.numel() != 1:
        if input.ndim < 2 or input.shape[1] != weight.numel():
            raise ShapeError(f"prelu: {weight.numel()} weights for input of shape "
                             f"{input.shape}: one per channel (dim 1), or one in all")
        weight = weight.reshape((1, weight.numel()) + (1,) * (input.ndim - 2))
    return where(input > 0, input, weight * input)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of x1 - x2 + eps over the last dim (F.pairwise_distance)."""
    diff = _abs_values(x1 - x2 + eps)
    if p == math.inf:
        return diff.amax(-1, keepdim=keepdim)
    return (diff ** p).sum(-1, keepdim=keepdim) ** (1.0 / p)
