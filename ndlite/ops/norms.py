"""group_norm and rms_norm as functions (`F.group_norm`, `F.rms_norm`), composed from
differentiable ops with PyTorch's formulas, so gradients of every order come from the ops
they are made of. The GroupNorm / RMSNorm modules are in ndlite.nn.layers_more."""

from __future__ import annotations

import math

from ..dtypes import finfo, is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .autocast import autocast_op
from .cast import widened
from .reduce import mean
from .registry import Spec, declare
from .samples import Sampler

NORM = Sampler("norm", "a well-conditioned input, with params['kind'] 'group' (N, C, ...) and "
                       "a num_groups dividing C, or 'rms' (..., D...) and a normalized_shape; "
                       "optional affine weight (and bias)")


def _check_float(op: str, tensors) -> None:
    for t in tensors:
        if t is not None and not is_floating(t.dtype):
            raise DTypeError(f"{op}: expected floating tensors, got {t.dtype}")


@autocast_op("group_norm")  # outside widened: float32 in a region
@widened
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize (N, C, ...) over each of num_groups groups of C / num_groups channels and
    their spatial dims (biased variance), then * weight + bias per channel.

    >>> import ndlite
    >>> x = ndlite.tensor([[1.0, 3.0, 0.0, 4.0]])
    >>> out = ndlite.nn.functional.group_norm(x, 2)
    >>> [round(v, 4) for v in out.flatten().tolist()]
    [-1.0, 1.0, -1.0, 1.0]
    """
    op = "group_norm"
    if input.ndim < 2:
        raise ShapeError(f"{op}: expected an input of at least 2 dims (N, C, ...), got shape "
                         f"{input.shape}")
    _check_float(op, (input, weight, bias))
    n, c = input.shape[0], input.shape[1]
    if not isinstance(num_groups, int) or num_groups <= 0 or c % num_groups:
        raise ShapeError(f"{op}: the {c} channels of input {input.shape} must be divisible by "
                         f"num_groups={num_groups!r}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ShapeError(f"{op}: {name} must have shape ({c},) for an input of shape "
                             f"{input.shape}, got {t.shape}")
    per_group = c // num_groups * math.prod(input.shape[2:])
    grouped = input.reshape(n, num_groups, per_group)
    centered = grouped - mean(grouped, -1, keepdim=True)
    var = mean(centered * centered, -1, keepdim=True)
    out = (centered / (var + eps).sqrt()).reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def normalized_dims(normalized_shape, input_shape: tuple, op: str) -> tuple:
    """normalized_shape as a tuple, checked against the trailing dims of the input."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(normalized_shape)
    if not shape:
        raise ShapeError(f"{op}: normalized_shape must have at least one element, got {shape}")
    if len(shape) > len(input_shape) or input_shape[len(input_shape) - len(shape):] != shape:
        raise ShapeError(f"{op}: normalized_shape {shape} does not match the trailing dims "
                         f"of input {input_shape}")
    return shape


@autocast_op("rms_norm")  # outside widened: float32 in a region
@widened
def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over the trailing `normalized_shape` dims, then * weight;
    eps=None means the machine epsilon of the input's dtype (PyTorch's default).

    >>> import ndlite
    >>> x = ndlite.tensor([[3.0, -3.0]])
    >>> ndlite.nn.functional.rms_norm(x, [2]).tolist()
    [[1.0, -1.0]]
    """
    op = "rms_norm"
    _check_float(op, (input, weight))
    shape = normalized_dims(normalized_shape, input.shape, op)
    if weight is not None and weight.shape != shape:
        raise ShapeError(f"{op}: weight must have the normalized shape {shape}, got "
                         f"{weight.shape}")
    if eps is None:
        eps = float(finfo(input.dtype).eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    out = input / (mean(input * input, dims, keepdim=True) + eps).sqrt()
    return out if weight is None else out * weight


declare("group_norm", Spec(NORM, second_order=True, params={"kind": "group"}), group_norm)
declare("rms_norm", Spec(NORM, second_order=True, params={"kind": "rms"}), rms_norm)
