"""Batch normalization as a function (`F.batch_norm`), composed from differentiable ops
(PyTorch's semantics: normalize with the biased batch variance, keep the unbiased one in
`running_var`). The BatchNorm1d / BatchNorm2d modules are in ndlite.nn.normalization."""

from __future__ import annotations

from .. import graph
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from . import samples
from .registry import Spec, declare


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias per channel (dim 1). In training, batch
    statistics are used and the running ones (if given) updated in place:
    running = (1 - momentum) * running + momentum * batch (unbiased variance).

    >>> import ndlite
    >>> x = ndlite.tensor([[1.0], [3.0]])
    >>> out = ndlite.nn.functional.batch_norm(x, None, None, training=True)
    >>> [round(v, 4) for v in out.flatten().tolist()]
    [-1.0, 1.0]
    """
    op = "batch_norm"
    if input.ndim < 2:
        raise ShapeError(f"{op}: expected an input of at least 2 dims (N, C, ...), got shape "
                         f"{input.shape}")
    if not is_floating(input.dtype):
        raise DTypeError(f"{op}: expected a floating input, got {input.dtype}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ShapeError(f"{op}: {name} must have shape ({c},) for an input of shape "
                             f"{input.shape}, got {t.shape}")
    if not training and (running_mean is None or running_var is None):
        raise ValueError(f"{op}: running_mean and running_var must be given in evaluation mode "
                         "(training=False); pass training=True to use batch statistics")
    axes = (0,) + tuple(range(2, input.ndim))
    count = input.numel() // max(c, 1)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        if count <= 1:
            raise ShapeError(f"{op}: expected more than 1 value per channel when training, got "
                             f"input of shape {input.shape}")
        mean = input.mean(axes, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(axes, keepdim=True)
        if training and running_mean is not None and running_var is not None:
            with graph.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.detach().reshape(c) * momentum)
                unbiased = var.detach().reshape(c) * (count / (count - 1))
                running_var.mul_(1 - momentum).add_(unbiased * momentum)
        out = centered / (var + eps).sqrt()
    else:
        out = (input - running_mean.reshape(shape)) / (running_var.reshape(shape) + eps).sqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


declare("batch_norm", Spec(samples.BATCH_NORM, second_order=True), batch_norm)
