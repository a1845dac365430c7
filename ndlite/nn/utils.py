"""`torch.nn.utils`: clip_grad_norm_, clip_grad_value_, parameters_to_vector.

>>> import ndlite
>>> p = ndlite.nn.Parameter(ndlite.ones(4))
>>> p.grad = ndlite.full((4,), 3.0)
>>> round(ndlite.nn.utils.clip_grad_norm_([p], 1.0).item(), 4), round(p.grad.sum().item(), 4)
(6.0, 2.0)
"""

from __future__ import annotations

from ..errors import ShapeError
from ..graph import no_grad
from ..ops.join import cat, stack
from ..ops.selection import vector_norm
from ..tensor import Tensor


def _grads(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients in place so that their joint `norm_type`-norm is at most
    `max_norm`; returns the norm before clipping (a 0-d tensor)."""
    grads = _grads(parameters)
    if not grads:
        from ..creation import tensor

        return tensor(0.0)
    with no_grad():
        norms = stack([vector_norm(g, norm_type) for g in grads])
        total = vector_norm(norms, norm_type)
        if error_if_nonfinite and not total.isfinite().item():
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                               "gradients is non-finite, so they cannot be clipped")
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element to [-clip_value, clip_value] in place."""
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened into one vector."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """The slices of the 1-D `vec` written into `parameters` in turn (parameters_to_vector's
    inverse), in place and outside the graph."""
    if vec.ndim != 1:
        raise ShapeError(f"vector_to_parameters: expected a 1-D vector, got shape {vec.shape}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if total != vec.shape[0]:
        raise ShapeError(f"vector_to_parameters: {vec.shape[0]} values for parameters of "
                         f"{total} elements")
    start = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[start:start + n].reshape(p.shape))
            start += n


def get_total_norm(tensors, norm_type: float = 2.0) -> Tensor:
    with no_grad():
        return vector_norm(stack([vector_norm(t, norm_type) for t in tensors]), norm_type)
