"""Layers with parameters or settings: Linear, Conv2d, the pooling layers, Flatten, Dropout.
Each holds its configuration and calls `ndlite.nn.functional`."""

from __future__ import annotations

from ..creation import empty
from ..ops.conv import conv2d_relu, pair
from ..tensor import Tensor
from . import functional as F
from .init import default_layer_init_
from .module import Module, Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _empty(*shape, dtype=None, backend=None) -> Tensor:
    return empty(*shape, dtype=dtype, backend=backend)


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features), PyTorch's default init.

    >>> import ndlite
    >>> ndlite.nn.Linear(3, 2)(ndlite.ones(5, 3)).shape
    (5, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, backend=None):
        super().__init__()
        backend = backend if backend is not None else device
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(_empty(out_features, in_features, dtype=dtype, backend=backend))
        self.bias = Parameter(_empty(out_features, dtype=dtype, backend=backend)) if bias \
            else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        default_layer_init_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    """2-D convolution layer, weight (out_channels, in_channels / groups, kh, kw); padding
    an int, a pair, 'same' or 'valid', with padding_mode 'zeros', 'reflect', 'replicate' or
    'circular'.

    >>> import ndlite
    >>> ndlite.nn.Conv2d(1, 4, 3, padding="same")(ndlite.ones(2, 1, 5, 5)).shape
    (2, 4, 5, 5)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, backend=None):
        super().__init__()
        backend = backend if backend is not None else device
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"Conv2d: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        if padding == "same" and pair(stride, "stride", "Conv2d") != (1, 1):
            raise ValueError("Conv2d: padding='same' is not supported for strided "
                             "convolutions")
        self.padding_mode = padding_mode
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = pair(stride, "stride", "Conv2d")
        self.padding = padding if isinstance(padding, str) else pair(padding, "padding",
                                                                      "Conv2d")
        self.dilation = pair(dilation, "dilation", "Conv2d")
        self.groups = groups
        self.weight = Parameter(_empty(out_channels, in_channels // groups, *self.kernel_size,
                                       dtype=dtype, backend=backend))
        self.bias = Parameter(_empty(out_channels, dtype=dtype, backend=backend)) if bias \
            else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        default_layer_init_(self.weight, self.bias)

    def _padded(self, input: Tensor) -> tuple:
        """(input, padding) for the convolution: with a padding_mode other than zeros, the
        input padded that way first and the convolution's own padding 0."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if self.padding == "valid":
            return input, 0
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            widths = (totals[1] // 2, totals[1] - totals[1] // 2,
                      totals[0] // 2, totals[0] - totals[0] // 2)
        else:
            widths = (self.padding[1], self.padding[1], self.padding[0], self.padding[0])
        return F.pad(input, widths, mode=self.padding_mode), 0

    def forward(self, input: Tensor) -> Tensor:
        input, padding = self._padded(input)
        return F.conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)

    def forward_relu(self, input: Tensor) -> Tensor:
        """relu(self(input)) as one op (ops/conv.py conv2d_relu; the layer has a bias): what a
        Sequential runs for this layer and the ReLU after it."""
        input, padding = self._padded(input)
        return conv2d_relu(input, self.weight, self.bias, self.stride, padding, self.dilation,
                           self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding not in ((0, 0), "valid"):
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s


class MaxPool2d(Module):
    """Max pooling layer (see `functional.max_pool2d`).

    >>> import ndlite
    >>> ndlite.nn.MaxPool2d(2)(ndlite.ones(1, 1, 4, 6)).shape
    (1, 1, 2, 3)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input: Tensor):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Average pooling layer (see `functional.avg_pool2d`)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Flatten(Module):
    """Dims start_dim..end_dim merged (by default all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Dropout(Module):
    """Zeroes elements with probability p while training (scaling the rest by 1 / (1 - p));
    the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability must be between 0 and 1, got {p}")
        self.p = p

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
