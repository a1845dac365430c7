"""Batch normalization as a function (`F.batch_norm`), with PyTorch's semantics: normalize with
the biased batch variance, keep the unbiased one in `running_var`. In training, a float input
with weight and bias of its dtype (or None) runs the backend's fused batch_norm and
batch_norm_grad (protocol.py; specification: ndlite/device/norm_fallbacks.py): one reduction
and one normalizing pass each way instead of a dozen elementwise ops. Anything else, and
evaluation (a plain affine of the running statistics), is composed. The BatchNorm1d /
BatchNorm2d modules are in ndlite.nn.normalization."""

from __future__ import annotations

from .. import graph
from ..dtypes import HALF, is_floating
from ..errors import DTypeError, ShapeError
from ..graph import mode
from ..tensor import Tensor
from . import samples
from .dispatch import apply
from .reduce import sum as tensor_sum
from .registry import Op, Spec, implements, register


@register
class BatchNorm(Op):
    """batch_norm in training on the backend's fast path: forward and (first-order) backward
    one fused call each (the forward keeps each channel's mean and invstd for the backward);
    while a graph of the backward is being built (create_graph), the backward is written in
    differentiable ops instead, so higher-order gradients are right."""

    name = "batch_norm"
    spec = Spec(samples.BATCH_NORM, second_order=True)
    save_inputs = True

    @staticmethod
    def forward(b, x, *affine, eps, weight, bias, **_):
        return b.batch_norm(x, affine[0] if weight else None, affine[-1] if bias else None,
                            eps)[0]

    @staticmethod
    def backward(node, grad):
        p = node.params
        x, weight = node.saved[0], node.saved[1] if p["weight"] else None
        if mode.enabled:
            return _batch_norm_backward(grad, x, weight, p)
        b = x._backend
        grads = b.batch_norm_grad(grad._data, x._data, None if weight is None else weight._data,
                                  p["mean"], p["invstd"], p["bias"])
        return tuple(Tensor._make(g, b) for g in grads if g is not None)


def _axes(x: Tensor) -> tuple:
    return (0,) + tuple(range(2, x.ndim))


def _per_channel(x: Tensor) -> tuple:
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _batch_norm_backward(grad, x, weight, p):
    """The gradients of batch_norm in differentiable ops (the fallback's formula, the batch
    statistics recomputed from x so that they are differentiated too); halves in float32, as
    the fused path."""
    if x.dtype in HALF:
        wide = _batch_norm_backward(grad.float(), x.float(),
                                    None if weight is None else weight.float(), p)
        return tuple(g.to(x.dtype) for g in wide)
    axes = _axes(x)
    centered = x - x.mean(axes, keepdim=True)
    invstd = 1.0 / ((centered * centered).mean(axes, keepdim=True) + p["eps"]).sqrt()
    xhat = centered * invstd
    scale = invstd if weight is None else invstd * weight.reshape(_per_channel(x))
    inner = grad - grad.mean(axes, keepdim=True) - xhat * (grad * xhat).mean(axes, keepdim=True)
    grads = [scale * inner]
    if weight is not None:
        grads.append(tensor_sum(grad * xhat, axes))
    if p["bias"]:
        grads.append(tensor_sum(grad, axes))
    return tuple(grads)


def _fusable(x: Tensor, *affine) -> bool:
    dtype, b = x._data.dtype, x._backend
    for t in affine:
        if t is not None and not (isinstance(t, Tensor) and t._data.dtype == dtype
                                  and t._backend is b):
            return False
    return True


def _fused(x: Tensor, weight, bias, eps: float):
    """(out, mean, var): the normalized tensor (recorded as one BatchNorm op) and the batch
    statistics as detached tensors (float32 for halves)."""
    b = x._backend
    y, mean, invstd, var = b.batch_norm(x._data, None if weight is None else weight._data,
                                        None if bias is None else bias._data, eps)
    inputs = tuple(t for t in (x, weight, bias) if t is not None)
    params = {"eps": eps, "weight": weight is not None, "bias": bias is not None,
              "mean": mean, "invstd": invstd}
    out = apply(BatchNorm, inputs, y, b, params)
    return out, Tensor._make(mean, b), Tensor._make(var, b)


def _composed(x: Tensor, weight, bias, eps: float):
    axes, shape = _axes(x), _per_channel(x)
    mean = x.mean(axes, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(axes, keepdim=True)
    out = centered / (var + eps).sqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, mean.detach().reshape(x.shape[1]), var.detach().reshape(x.shape[1])


def _check(op: str, input: Tensor, tensors) -> None:
    shape = input._data.shape
    if len(shape) < 2:
        raise ShapeError(f"{op}: expected an input of at least 2 dims (N, C, ...), got shape "
                         f"{input.shape}")
    if not is_floating(input._data.dtype):
        raise DTypeError(f"{op}: expected a floating input, got {input.dtype}")
    c = (shape[1],)
    for name, t in tensors:
        if t is not None and t.shape != c:
            raise ShapeError(f"{op}: {name} must have shape ({c[0]},) for an input of shape "
                             f"{input.shape}, got {t.shape}")


@implements(BatchNorm)
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
    _check(op, input, (("running_mean", running_mean), ("running_var", running_var),
                       ("weight", weight), ("bias", bias)))
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: running_mean and running_var must be given in evaluation "
                             "mode (training=False); pass training=True to use batch statistics")
        shape = _per_channel(input)
        out = (input - running_mean.reshape(shape)) / (running_var.reshape(shape) + eps).sqrt()
        if weight is not None:
            out = out * weight.reshape(shape)
        return out if bias is None else out + bias.reshape(shape)
    count = input.numel() // max(input.shape[1], 1)
    if count <= 1:
        raise ShapeError(f"{op}: expected more than 1 value per channel when training, got "
                         f"input of shape {input.shape}")
    run = _fused if _fusable(input, weight, bias) else _composed
    out, mean, var = run(input, weight, bias, float(eps))
    if running_mean is not None and running_var is not None:
        _update(running_mean, running_var, mean, var, float(momentum), count)
    return out


def _update(running_mean: Tensor, running_var: Tensor, mean: Tensor, var: Tensor,
            momentum: float, count: int) -> None:
    """running = (1 - momentum) * running + momentum * batch (the variance unbiased), in place:
    one backend call (batch_norm_update) for plain buffers on the input's backend, tensor ops
    for views and the rest; the same float operations either way."""
    b = mean._backend
    if running_mean._backend is b and running_var._backend is b and running_mean._view is None \
            and running_var._view is None and is_floating(running_mean._data.dtype) \
            and is_floating(running_var._data.dtype):
        b.batch_norm_update(running_mean._data, running_var._data, mean._data, var._data,
                            momentum, count)
        running_mean._bump()
        running_var._bump()
        return
    with graph.no_grad():
        running_mean.mul_(1 - momentum).add_((mean * momentum).to(running_mean.dtype))
        unbiased = var * (count / (count - 1))
        running_var.mul_(1 - momentum).add_((unbiased * momentum).to(running_var.dtype))
