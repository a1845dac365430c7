"""Weight initializations, PyTorch's `torch.nn.init`: each fills a tensor in place (without
recording a graph) from ndlite's seeded host generator, so a seed gives the same weights on
every backend. Layers use `kaiming_uniform_(a=sqrt(5))` and a fan-in uniform bias, PyTorch's
defaults for Linear and Conv2d."""

from __future__ import annotations

import math

import numpy as np

from .. import graph
from ..creation import generator
from ..creation import tensor as make
from ..tensor import Tensor


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    with graph.no_grad():
        tensor.copy_(make(values.astype(tensor.dtype), backend=tensor.backend))
    return tensor


def _rng():
    return generator()


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    """(fan_in, fan_out): input and output units times the receptive field size."""
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out can not be computed for a tensor with fewer than "
                         f"2 dims (shape {tensor.shape})")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Values from U(a, b).

    >>> import ndlite
    >>> w = ndlite.nn.init.uniform_(ndlite.empty(3), -1, 1)
    >>> bool(((w >= -1) & (w < 1)).all())
    True
    """
    return _fill(tensor, _rng().uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Values from N(mean, std^2)."""
    return _fill(tensor, _rng().normal(mean, std, tensor.shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _fill(tensor, np.full(tensor.shape, val))


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu") -> Tensor:
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al.); PyTorch's layers use a=sqrt(5).

    >>> import ndlite
    >>> w = ndlite.nn.init.kaiming_uniform_(ndlite.empty(4, 100), a=5 ** 0.5)
    >>> bool((w.abs() <= 0.1).all())
    True
    """
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / _fan(tensor, mode))
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu") -> Tensor:
    """N(0, std^2) with std = gain / sqrt(fan)."""
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)))


def default_layer_init_(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's reset_parameters of Linear and Conv2d: kaiming_uniform_(a=sqrt(5)) for the
    weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = calculate_fan_in_and_fan_out(weight)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        uniform_(bias, -bound, bound)
