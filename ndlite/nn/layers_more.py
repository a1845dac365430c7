"""More layers with PyTorch's names, defaults and initializations: Conv1d, ConvTranspose1d,
ConvTranspose2d, GroupNorm and RMSNorm, over the functional ops of ndlite/ops/conv_more.py
and ndlite/ops/norms.py."""

from __future__ import annotations

from ..creation import empty, ones, zeros
from ..ops.conv import pair
from ..ops.conv_more import conv1d, conv_transpose1d, conv_transpose2d, single
from ..ops.norms import group_norm, rms_norm
from ..ops.resample import pad
from ..tensor import Tensor
from .init import default_layer_init_
from .module import Module, Parameter

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What the convolution layers share: checks, parameters, PyTorch's initialization."""

    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias, padding_mode, dtype, backend, output_padding=None):
        super().__init__()
        name = type(self).__name__
        if not isinstance(groups, int) or groups <= 0 or in_channels % groups or \
                out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups!r})")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {PADDING_MODES}, got "
                             f"{padding_mode!r}")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f"{name}: only 'zeros' padding mode is supported, got "
                             f"{padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = kernel_size, stride, dilation
        self.padding, self.padding_mode = padding, padding_mode
        if output_padding is not None:
            self.output_padding = output_padding
        if self.transposed:
            shape = (in_channels, out_channels // groups) + kernel_size
        else:
            shape = (out_channels, in_channels // groups) + kernel_size
        self.weight = Parameter(empty(*shape, dtype=dtype, backend=backend))
        self.bias = Parameter(empty(out_channels, dtype=dtype, backend=backend)) if bias \
            else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        default_layer_init_(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        zero = (0,) * len(self.kernel_size)
        if self.padding not in (zero, "valid"):
            s += f", padding={self.padding!r}"
        if self.dilation != (1,) * len(self.kernel_size):
            s += f", dilation={self.dilation}"
        if getattr(self, "output_padding", zero) != zero:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s


def _where(backend, device):
    return backend if backend is not None else device


class Conv1d(_ConvNd):
    """1-D convolution layer over (N, C, L) or (C, L), weight (out_channels, in_channels /
    groups, kernel_size); padding an int, 'same' or 'valid', with padding_mode 'zeros',
    'reflect', 'replicate' or 'circular'.

    >>> import ndlite
    >>> ndlite.nn.Conv1d(2, 4, 3, padding="same")(ndlite.ones(5, 2, 7)).shape
    (5, 4, 7)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, backend=None):
        name = "Conv1d"
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be an int, 'valid' or 'same', got "
                                 f"{padding!r}")
            if padding == "same" and single(stride, "stride", name) != 1:
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions")
        else:
            padding = (single(padding, "padding", name),)
        super().__init__(in_channels, out_channels, (single(kernel_size, "kernel_size", name),),
                         (single(stride, "stride", name),), padding,
                         (single(dilation, "dilation", name),), groups, bias, padding_mode,
                         dtype, _where(backend, device))

    def _widths(self) -> tuple:
        """(left, right) padding for a padding_mode other than zeros."""
        if self.padding == "valid":
            return (0, 0)
        if self.padding == "same":
            total = self.dilation[0] * (self.kernel_size[0] - 1)
            return (total // 2, total - total // 2)
        return (self.padding[0], self.padding[0])

    def forward(self, input: Tensor) -> Tensor:
        if self.padding_mode == "zeros":
            padding = self.padding if isinstance(self.padding, str) else self.padding[0]
            return conv1d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                          self.groups)
        padded = pad(input, self._widths(), mode=self.padding_mode)
        return conv1d(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """PyTorch's rule: an output_size picks the output_padding that reaches it."""
        if output_size is None:
            return self.output_padding
        dims = len(self.kernel_size)
        name = type(self).__name__
        size = tuple(int(s) for s in output_size)
        if len(size) not in (dims, dims + 1, dims + 2):
            raise ValueError(f"{name}: output_size must have {dims} or {dims + 2} elements, "
                             f"got {output_size!r}")
        size = size[len(size) - dims:]
        extra = []
        for i in range(dims):
            n = input.shape[input.ndim - dims + i]
            low = (n - 1) * self.stride[i] - 2 * self.padding[i] + \
                self.dilation[i] * (self.kernel_size[i] - 1) + 1
            high = low + self.stride[i] - 1
            if not low <= size[i] <= high:
                raise ValueError(f"{name}: requested an output size of {size}, but valid sizes "
                                 f"for input {input.shape} range from {low} to {high} in dim "
                                 f"{i}")
            extra.append(size[i] - low)
        return tuple(extra)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution layer, weight (in_channels, out_channels / groups,
    kernel_size): the gradient of Conv1d with respect to its input, as a layer.

    >>> import ndlite
    >>> ndlite.nn.ConvTranspose1d(2, 3, 3, stride=2)(ndlite.ones(1, 2, 4)).shape
    (1, 3, 9)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None, backend=None):
        name = "ConvTranspose1d"
        geometry = [(single(v, n, name),) for v, n in (
            (kernel_size, "kernel_size"), (stride, "stride"), (padding, "padding"),
            (dilation, "dilation"), (output_padding, "output_padding"))]
        super().__init__(in_channels, out_channels, *geometry[:4], groups, bias,
                         padding_mode, dtype, _where(backend, device), geometry[4])

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        return conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups,
                                self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution layer, weight (in_channels, out_channels / groups, kh, kw):
    the gradient of Conv2d with respect to its input, as a layer.

    >>> import ndlite
    >>> ndlite.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)(ndlite.ones(1, 2, 4, 4)).shape
    (1, 3, 7, 7)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None, backend=None):
        name = "ConvTranspose2d"
        geometry = [pair(v, n, name) for v, n in (
            (kernel_size, "kernel_size"), (stride, "stride"), (padding, "padding"),
            (dilation, "dilation"), (output_padding, "output_padding"))]
        super().__init__(in_channels, out_channels, *geometry[:3], geometry[3], groups, bias,
                         padding_mode, dtype, _where(backend, device), geometry[4])

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        return conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups,
                                self.dilation)


class GroupNorm(Module):
    """Group normalization over (N, C, ...): num_groups groups of num_channels / num_groups
    channels, each normalized with its own mean and variance; affine weight ones, bias zeros.

    >>> import ndlite
    >>> ndlite.nn.GroupNorm(2, 4)(ndlite.randn(3, 4, 5)).shape
    (3, 4, 5)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, backend=None):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        where = _where(backend, device)
        self.weight = Parameter(ones(num_channels, dtype=dtype, backend=where)) if affine \
            else None
        self.bias = Parameter(zeros(num_channels, dtype=dtype, backend=where)) if affine \
            else None

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """Root-mean-square normalization over the trailing normalized_shape dims, then * weight
    (ones; elementwise_affine=False drops it); eps=None is the dtype's machine epsilon.

    >>> import ndlite
    >>> ndlite.nn.RMSNorm(4)(ndlite.randn(2, 3, 4)).shape
    (2, 3, 4)
    """

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None, backend=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
            tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(ones(shape, dtype=dtype, backend=_where(backend, device))) \
            if elementwise_affine else None

    def forward(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
