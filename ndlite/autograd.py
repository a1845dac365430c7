"""The public autograd API over the engine (ndlite.graph): `backward`, `grad`
(torch.autograd.grad), and the functional `value_and_grad` / `grad_of` (exported as
`ndlite.grad`, like jax.grad), plus the grad-mode switches.

`grad` and `value_and_grad` compose: with `create_graph=True` (which `value_and_grad` uses
whenever grad mode is on around it) the gradients are themselves differentiable, so
`ndlite.grad(ndlite.grad(f))` is the second derivative.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from .creation import tensor as make_tensor
from .dtypes import is_floating
from .errors import DeviceMismatchError, DTypeError, ShapeError
from .graph import (
    enable_grad,
    is_grad_enabled,
    no_grad,
    run_backward,
    set_grad_enabled,
)
from .tensor import Tensor

__all__ = ["backward", "grad", "value_and_grad", "grad_of", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled"]


def _ones_like(t: Tensor) -> Tensor:
    return Tensor._make(t._backend.full(t.shape, 1, t.dtype), t._backend)


def _as_grad(g, like: Tensor, op: str) -> Tensor:
    if not isinstance(g, Tensor):
        g = make_tensor(g, dtype=like.dtype, backend=like._backend)
    if g.shape != like.shape:
        raise ShapeError(f"{op}: gradient has shape {g.shape} but the output has shape "
                         f"{like.shape}")
    if g._backend is not like._backend:
        raise DeviceMismatchError(
            f"{op}: gradient is on {g._backend.name} but the output is on {like._backend.name}")
    return g


def backward(tensor: Tensor, gradient=None, retain_graph: bool | None = None,
             create_graph: bool = False) -> None:
    """Gradients of `tensor` with respect to every leaf that requires grad, into `.grad`
    (Tensor.backward)."""
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError(
                f"backward: grad can be implicitly created only for scalar outputs, but the "
                f"output has shape {tensor.shape}; pass gradient= with that shape")
        gradient = _ones_like(tensor)
    else:
        gradient = _as_grad(gradient, tensor, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    run_backward([tensor], [gradient], retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False):
    """The gradients of `outputs` with respect to `inputs`, returned rather than accumulated
    (torch.autograd.grad). With `create_graph=True` the results can be differentiated again.

    >>> import ndlite
    >>> x = ndlite.tensor([1.0, 2.0], requires_grad=True)
    >>> (g,) = ndlite.autograd.grad((x ** 3).sum(), [x], create_graph=True)
    >>> ndlite.autograd.grad(g.sum(), [x])[0].tolist()   # d²/dx² x³ = 6x
    [6.0, 12.0]
    """
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    seeds = []
    for out, g in zip(outputs, grad_outputs):
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad: grad_outputs must be given for a non-scalar output "
                                   f"of shape {out.shape}")
            g = _ones_like(out)
        seeds.append(_as_grad(g, out, "grad"))
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("grad: one of the inputs does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    result = run_backward(outputs, seeds, retain_graph, create_graph, capture=inputs)
    if not allow_unused and any(r is None for r in result):
        raise RuntimeError("grad: one of the inputs was not used in the graph; pass "
                           "allow_unused=True to get None for it")
    return tuple(result)


def _fresh_leaves(args: list, nums: Sequence[int]) -> list:
    """The arguments in `nums` as new leaves that require grad. Under grad mode they stay
    connected to the caller's graph (x * 1 is a differentiable identity), so that an outer
    grad can differentiate through this one."""
    for i in nums:
        if not isinstance(args[i], Tensor):
            raise TypeError(f"value_and_grad: argument {i} must be a Tensor, "
                            f"got {type(args[i]).__name__}")
        if not is_floating(args[i].dtype):
            raise DTypeError(f"value_and_grad: argument {i} has dtype {args[i].dtype}; "
                             "only floating tensors have gradients")
        if is_grad_enabled() and args[i].requires_grad:
            args[i] = args[i] * 1
        else:
            args[i] = args[i].detach().requires_grad_()
    return args


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """`fn`'s value and its gradient with respect to the arguments in `argnums` (JAX-style).

    `fn` must return a scalar tensor (or `(scalar, aux)` with `has_aux=True`). The arguments'
    own `.grad` is never touched; an argument that does not affect the value gets a zero
    gradient. Nested calls compose: under grad mode the gradient is returned with its graph
    when an argument requires grad, so `grad(grad(f))` differentiates twice.

    >>> import ndlite
    >>> value, g = ndlite.value_and_grad(lambda x: (x * x).sum())(ndlite.tensor([3.0]))
    >>> value.item(), g.tolist()
    (9.0, [6.0])
    """
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        outer = is_grad_enabled() and any(
            isinstance(args[i], Tensor) and args[i].requires_grad for i in nums)
        args = _fresh_leaves(list(args), nums)
        with enable_grad():
            out = fn(*args, **kwargs)
        value, aux = out if has_aux else (out, None)
        if not isinstance(value, Tensor) or value.numel() != 1:
            raise ShapeError("value_and_grad: fn must return a scalar tensor, got "
                             f"{getattr(value, 'shape', type(value).__name__)}")
        wrt = [args[i] for i in nums]
        grads = [None] * len(wrt)
        if value.requires_grad:
            grads = run_backward([value], [_ones_like(value)], outer, outer, capture=wrt)
        grads = tuple(g if g is not None else t.detach() * 0 for g, t in zip(grads, wrt))
        if not outer:
            value = value.detach()
        grads = grads[0] if single else grads
        return ((value, aux), grads) if has_aux else (value, grads)

    return wrapper


def grad_of(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """The gradient function of scalar-valued `fn` (exported as `ndlite.grad`, like jax.grad).

    >>> import ndlite
    >>> ndlite.grad(lambda x: (x ** 2).sum())(ndlite.tensor([1.0, -2.0])).tolist()
    [2.0, -4.0]
    >>> ndlite.grad(ndlite.grad(lambda t: t ** 3))(ndlite.tensor(2.0)).item()  # 6t
    12.0
    """
    vg = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper
