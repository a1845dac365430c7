"""Batch normalization: the functional `batch_norm` and the BatchNorm1d / BatchNorm2d modules
with running statistics (PyTorch's semantics: normalize with the biased batch variance, keep
the unbiased one in `running_var`)."""

from __future__ import annotations

from .. import autograd
from ..errors import DTypeError, ShapeError
from ..ops.registry import Spec, declare
from ..tensor import Tensor
from .module import Module, Parameter


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
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating input, got {input.dtype}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ShapeError(f"{op}: {name} must have shape ({c},) for an input of shape "
                             f"{input.shape}, got {t.shape}")
    axes = (0,) + tuple(range(2, input.ndim))
    count = input.numel() // max(c, 1)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training or running_mean is None or running_var is None:
        if count <= 1:
            raise ShapeError(f"{op}: expected more than 1 value per channel when training, got "
                             f"input of shape {input.shape}")
        mean = input.mean(axes, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(axes, keepdim=True)
        if training and running_mean is not None and running_var is not None:
            with autograd.no_grad():
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


declare("batch_norm", Spec("batch_norm", call="ndlite.nn.functional:batch_norm",
                           second_order=True))


class _BatchNorm(Module):
    expected_dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True, dtype=None,
                 backend=None):
        super().__init__()
        from ..creation import ones, zeros

        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype, backend=backend))
            self.bias = Parameter(zeros(num_features, dtype=dtype, backend=backend))
        else:
            self.weight = self.bias = None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype,
                                                       backend=backend))
            self.register_buffer("running_var", ones(num_features, dtype=dtype,
                                                     backend=backend))
        else:
            self.running_mean = self.running_var = None

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self.expected_dims:
            dims = " or ".join(map(str, self.expected_dims))
            raise ShapeError(f"{type(self).__name__}: expected a {dims}-D input, got shape "
                             f"{input.shape}")
        if input.shape[1] != self.num_features:
            raise ShapeError(f"{type(self).__name__}: expected {self.num_features} channels "
                             f"(dim 1), got input of shape {input.shape}")
        use_batch = self.training or self.running_mean is None
        return batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                          use_batch, self.momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) inputs.

    >>> import ndlite
    >>> ndlite.nn.BatchNorm1d(3)(ndlite.randn(4, 3)).shape
    (4, 3)
    """

    expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) inputs, per channel.

    >>> import ndlite
    >>> ndlite.nn.BatchNorm2d(2)(ndlite.randn(4, 2, 3, 3)).shape
    (4, 2, 3, 3)
    """

    expected_dims = (4,)
