"""Batch normalization modules, BatchNorm1d / BatchNorm2d, with running statistics (the
functional `batch_norm` they call is ndlite.ops.normalization's)."""

from __future__ import annotations

from ..creation import ones, tensor, zeros
from ..errors import ShapeError
from ..graph import no_grad
from ..ops.normalization import batch_norm
from ..tensor import Tensor
from .module import Module, Parameter


class _BatchNorm(Module):
    expected_dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, backend=None):
        super().__init__()
        backend = backend if backend is not None else device
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
            self.register_buffer("num_batches_tracked", tensor(0, backend=backend))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, input: Tensor) -> Tensor:
        shape = input._data.shape
        if len(shape) not in self.expected_dims:
            dims = " or ".join(map(str, self.expected_dims))
            raise ShapeError(f"{type(self).__name__}: expected a {dims}-D input, got shape "
                             f"{input.shape}")
        if shape[1] != self.num_features:
            raise ShapeError(f"{type(self).__name__}: expected {self.num_features} channels "
                             f"(dim 1), got input of shape {input.shape}")
        params, buffers = self._parameters, self._buffers  # one lookup each, not per name
        running_mean, tracked = buffers.get("running_mean"), buffers.get("num_batches_tracked")
        use_batch = self.training or running_mean is None
        momentum = self.momentum
        if self.training and tracked is not None:
            _increment(tracked)
            if momentum is None:  # PyTorch: the cumulative average of every batch so far
                momentum = 1.0 / tracked.item()
        return batch_norm(input, running_mean, buffers.get("running_var"),
                          params.get("weight"), params.get("bias"), use_batch,
                          0.0 if momentum is None else momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


def _increment(counter: Tensor) -> None:
    """counter += 1, in place, outside the graph: for a plain tensor (no view, not viewed)
    one backend call (protocol add_scalar_inplace: bitwise add_(1)'s add and assign) and the
    version bump, without add_'s checks and dispatch (an integer or float keeps its dtype)."""
    if counter._view is None and counter._views is None and not counter._rg and \
            counter._data.dtype.kind != "b":  # bool + 1 is int64: add_ raises
        counter._backend.add_scalar_inplace(counter._data, 1)
        counter._bump()
        return
    with no_grad():
        counter.add_(1)


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
