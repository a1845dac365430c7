"""More of PyTorch's layers, each over a function of `ndlite.nn.functional`: PixelShuffle,
PixelUnshuffle, ChannelShuffle, Fold and Unfold, AdaptiveMaxPool2d, Upsample (and
UpsamplingNearest2d / UpsamplingBilinear2d), Unflatten, the padding layers (ZeroPad,
ConstantPad, ReflectionPad, ReplicationPad, CircularPad in 1-D and 2-D), Dropout1d / Dropout2d,
InstanceNorm1d / InstanceNorm2d, MaxPool1d, AvgPool1d, CosineSimilarity, PairwiseDistance and
Bilinear."""

from __future__ import annotations

import math

from ..creation import empty, ones, zeros
from ..tensor import Tensor
from . import functional as F
from .init import uniform_
from .module import Module, Parameter


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r)"""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W)"""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class Upsample(Module):
    """`functional.interpolate` as a layer.

    >>> import ndlite
    >>> ndlite.nn.Upsample(scale_factor=2)(ndlite.ones(1, 1, 2, 3)).shape
    (1, 1, 4, 6)
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else \
            f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling with align_corners=True (as PyTorch's)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


class Unflatten(Module):
    """Dim `dim` split into `unflattened_size`."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _Pad(Module):
    mode, dims = "constant", 2

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        n = 2 * self.dims
        self.padding = (padding,) * n if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or {n} ints, got "
                             f"{padding}")
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" else "")


def _padding_layer(name: str, mode: str, dims: int, constant: bool):
    if constant:
        def __init__(self, padding, value: float):
            _Pad.__init__(self, padding, value)
    else:
        def __init__(self, padding):
            _Pad.__init__(self, padding)
    doc = f"F.pad(input, padding, {mode!r}) over the last {dims} dim(s)"
    return type(name, (_Pad,), {"mode": mode, "dims": dims, "__init__": __init__,
                                "__doc__": doc, "__module__": __name__})


ZeroPad1d = _padding_layer("ZeroPad1d", "constant", 1, False)
ZeroPad2d = _padding_layer("ZeroPad2d", "constant", 2, False)
ConstantPad1d = _padding_layer("ConstantPad1d", "constant", 1, True)
ConstantPad2d = _padding_layer("ConstantPad2d", "constant", 2, True)
ReflectionPad1d = _padding_layer("ReflectionPad1d", "reflect", 1, False)
ReflectionPad2d = _padding_layer("ReflectionPad2d", "reflect", 2, False)
ReplicationPad1d = _padding_layer("ReplicationPad1d", "replicate", 1, False)
ReplicationPad2d = _padding_layer("ReplicationPad2d", "replicate", 2, False)
CircularPad1d = _padding_layer("CircularPad1d", "circular", 1, False)
CircularPad2d = _padding_layer("CircularPad2d", "circular", 2, False)


class Dropout2d(Module):
    """Whole channels zeroed with probability p while training (`functional.dropout2d`)."""

    spatial = 2

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability must be between 0 and 1, "
                             f"got {p}")
        self.p = p

    def forward(self, input: Tensor) -> Tensor:
        fn = F.dropout2d if self.spatial == 2 else F.dropout1d
        return fn(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Dropout1d(Dropout2d):
    """Whole channels of (N, C, L) zeroed with probability p while training."""

    spatial = 1


class InstanceNorm2d(Module):
    """Each (sample, channel) normalized over its spatial dims; with `affine`, a learned
    weight and bias per channel. Running statistics (track_running_stats=True) are not kept:
    asking for them raises."""

    _dims = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, backend=None):
        super().__init__()
        if track_running_stats:
            raise NotImplementedError(f"{type(self).__name__}: track_running_stats=True is "
                                      "not implemented")
        self.num_features, self.eps, self.affine = num_features, eps, affine
        where = backend if backend is not None else device
        self.weight = Parameter(ones(num_features, dtype=dtype, backend=where)) if affine \
            else None
        self.bias = Parameter(zeros(num_features, dtype=dtype, backend=where)) if affine \
            else None

    def forward(self, input: Tensor) -> Tensor:
        batched = input.ndim == self._dims + 2
        x = input if batched else input.unsqueeze(0)
        out = F.instance_norm(x, weight=self.weight, bias=self.bias, eps=self.eps)
        return out if batched else out.squeeze(0)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.affine}"


class InstanceNorm1d(InstanceNorm2d):
    _dims = 1


class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Bilinear(Module):
    """y = x1^T A x2 + b, weight (out, in1, in2), both drawn from U(-1/sqrt(in1), 1/sqrt(in1))
    as PyTorch's."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None, backend=None):
        super().__init__()
        where = backend if backend is not None else device
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in1_features, in2_features, dtype=dtype,
                                      backend=where))
        self.bias = Parameter(empty(out_features, dtype=dtype, backend=where)) if bias else None
        bound = 1 / math.sqrt(in1_features) if in1_features else 0.0
        uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class ChannelShuffle(Module):
    """The channels interleaved across `groups` groups (ShuffleNet)."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Unfold(Module):
    """`functional.unfold` (im2col) as a layer."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Unfold):
    """`functional.fold` (col2im) as a layer."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)


class AdaptiveMaxPool2d(Module):
    """`functional.adaptive_max_pool2d` as a layer."""

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
