"""More of `torch.nn.functional`, composed from registered ops: pixel (un)shuffle, channel
dropout, instance norm, 1-D pooling, the bilinear form, and the margin and embedding losses.
Every backend runs them and differentiates them to any order.
"""

from __future__ import annotations

import numbers

from ..creation import generator, rand_like
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .activation import softmax
from .activations_more import pairwise_distance
from .einsum import einsum
from .elementwise import where
from .join import cat
from .losses_more import _reduce
from .math import softplus
from .norms import group_norm
from .pool import avg_pool2d, max_pool2d
from .reduce import amax
from .selection import one_hot


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) -> (*, C, H r, W r): sub-pixel convolution's rearrangement.

    >>> import ndlite
    >>> ndlite.nn.functional.pixel_shuffle(ndlite.ones(1, 8, 2, 3), 2).shape
    (1, 2, 4, 6)
    """
    r = int(upscale_factor)
    if input.ndim < 3 or r < 1 or input.shape[-3] % (r * r):
        raise ShapeError(f"pixel_shuffle: input of shape {input.shape} needs (*, C r^2, H, W) "
                         f"channels divisible by {r}^2")
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) -> (*, C r^2, H, W), pixel_shuffle's inverse."""
    r = int(downscale_factor)
    if input.ndim < 3 or r < 1 or input.shape[-2] % r or input.shape[-1] % r:
        raise ShapeError(f"pixel_unshuffle: input of shape {input.shape} needs H and W "
                         f"divisible by {r}")
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def _channel_dropout(input: Tensor, p: float, training: bool, spatial: int, op: str) -> Tensor:
    """Whole channels zeroed with probability p (the rest scaled by 1 / (1 - p)): inputs
    (N, C, *spatial) or (C, *spatial), one mask value per channel, drawn where the data lives
    from one seed of ndlite's generator (as dropout)."""
    if not is_floating(input.dtype):
        raise DTypeError(f"{op}: expected a floating input, got {input.dtype}")
    if not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: probability must be between 0 and 1, got {p!r}")
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(f"{op}: expected a {spatial + 1}-D or {spatial + 2}-D input, got "
                         f"shape {input.shape}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    channels = input.shape[:input.ndim - spatial]
    b, seed = input._backend, int(generator().integers(0, 2**63))
    mask = b.dropout_mask(channels + (1,) * spatial, float(p), seed, input.dtype)
    return input * Tensor._make(mask, b)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel dropout for (N, C, L) or (C, L) inputs."""
    return _channel_dropout(input, p, training, 1, "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel dropout for (N, C, H, W) or (C, H, W) inputs.

    >>> import ndlite
    >>> ndlite.nn.functional.dropout2d(ndlite.ones(1, 2, 2, 2), training=False).sum().item()
    8.0
    """
    return _channel_dropout(input, p, training, 2, "dropout2d")


def instance_norm(input: Tensor, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Tensor:
    """Each (sample, channel) normalized over its spatial dims (biased variance), then
    * weight + bias per channel: group_norm with a group per channel. Running statistics
    (track_running_stats) are not kept: pass None."""
    if running_mean is not None or running_var is not None or not use_input_stats:
        raise NotImplementedError("instance_norm: running statistics (track_running_stats) "
                                  "are not implemented; normalize with the input's own")
    if input.ndim < 3:
        raise ShapeError(f"instance_norm: expected (N, C, ...) input, got {input.shape}")
    return group_norm(input, input.shape[1], weight, bias, eps)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over each window of (N, C, L) or (C, L) input (max_pool2d on a height of 1)."""
    if return_indices:
        raise NotImplementedError("max_pool1d: return_indices is not implemented")
    out = max_pool2d(input.unsqueeze(-2), _row(kernel_size),
                     None if stride is None else _row(stride), _row(padding, 0),
                     _row(dilation), ceil_mode)
    return out.squeeze(-2)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Mean over each window of (N, C, L) or (C, L) input."""
    out = avg_pool2d(input.unsqueeze(-2), _row(kernel_size),
                     None if stride is None else _row(stride), _row(padding, 0), ceil_mode,
                     count_include_pad)
    return out.squeeze(-2)


def _row(v, lead: int = 1) -> tuple:
    """A 1-D pooling setting as the 2-D one over a height of 1: (lead, v)."""
    return (lead, v if isinstance(v, int) else v[0])


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None):
    """x1^T A_k x2 + b_k for each output k: weight (out, in1, in2)."""
    out = einsum("...i,oij,...j->...o", input1, weight, input2)
    return out if bias is None else out + bias


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin)."""
    loss = (-target * (input1 - input2) + margin).clamp(min=0.0)
    return _reduce(loss, reduction, "margin_ranking_loss")


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction: str = "mean") -> Tensor:
    """x where target is not -1, plus max(0, margin - x) where it is not 1 (PyTorch's form:
    the two terms for targets of 1 and -1)."""
    loss = where(target != -1, input, 0.0) + where(target != 1, (margin - input).clamp(min=0.0),
                                                   0.0)
    return _reduce(loss, reduction, "hinge_embedding_loss")


def soft_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), as softplus."""
    return _reduce(softplus(-target * input), reduction, "soft_margin_loss")


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1, with
    PyTorch's cos = x1 . x2 / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12)) over the last dim."""
    cos = (input1 * input2).sum(-1) / (((input1 * input1).sum(-1) + 1e-12) *
                                       ((input2 * input2).sum(-1) + 1e-12)).sqrt()
    loss = where(target == 1, 1.0 - cos, 0.0) + where(target == -1,
                                                      (cos - margin).clamp(min=0.0), 0.0)
    return _reduce(loss, reduction, "cosine_embedding_loss")


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        reduction: str = "mean") -> Tensor:
    """max(0, d(a, p) - d(a, n) + margin) with d the pairwise p-distance (`swap`: the
    smaller of d(a, n) and d(p, n))."""
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_swap = pairwise_distance(positive, negative, p, eps)
        d_neg = where(d_swap < d_neg, d_swap, d_neg)
    loss = (d_pos - d_neg + margin).clamp(min=0.0)
    return _reduce(loss, reduction, "triplet_margin_loss")


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """The channels of (N, C, *) in `groups` groups interleaved (ShuffleNet):
    (N, g, C / g, *) -> (N, C / g, g, *)."""
    if input.ndim < 3 or groups <= 0 or input.shape[1] % groups:
        raise ShapeError(f"channel_shuffle: {groups} groups for input of shape {input.shape}")
    n, c, *rest = input.shape
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False) -> Tensor:
    """Max over each of output_size windows of (N, C, H, W) or (C, H, W): window i spans rows
    floor(i H / oh) to ceil((i + 1) H / oh), as PyTorch's; max_pool2d where they tile."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool2d: return_indices is not implemented")
    if input.ndim not in (3, 4):
        raise ShapeError(f"adaptive_max_pool2d: expected a 3-D or 4-D input, got shape "
                         f"{input.shape}")
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    h, w = input.shape[-2:]
    oh, ow = (h if size[0] is None else size[0], w if size[1] is None else size[1])
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"adaptive_max_pool2d: output size must be positive, got {(oh, ow)}")
    if h % oh == 0 and w % ow == 0:
        return max_pool2d(input, (h // oh, w // ow))
    rows = []
    for i in range(oh):
        r0, r1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        cells = [amax(input[..., r0:r1, (j * w) // ow:-((-(j + 1) * w) // ow)], (-2, -1), True)
                 for j in range(ow)]
        rows.append(cat(cells, -1))
    return cat(rows, -2)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """softmax((logits + g) / tau) with Gumbel(0, 1) noise g drawn from ndlite's generator; with
    `hard`, the one-hot of its argmax in the forward and the soft sample's gradient
    (straight-through)."""
    exponential = -rand_like(logits).clamp(min=eps).log()  # Exp(1) from U in [0, 1)
    gumbels = -exponential.log()
    soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return soft
    index = soft.argmax(dim)
    axis = dim % logits.ndim
    onehot = one_hot(index, logits.shape[axis]).to(soft.dtype).movedim(-1, axis)
    return onehot - soft.detach() + soft
