"""Reductions: sum, mean, var, std, max, min, argmax, argmin, logsumexp, all, any.

`dim` is an int, a tuple of ints or None (every dim), `keepdim` keeps reduced dims as size 1,
as in PyTorch. The gradient of amax/amin (and max()/min() of a whole tensor) is shared evenly
among tied extremal elements; max(dim)/min(dim) send it to the returned index, as PyTorch.
"""

from __future__ import annotations

import builtins
from collections import namedtuple

from .. import creation, graph
from ..amp_state import switch as amp
from ..dtypes import bool_, int64, is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor, _dim
from . import samples
from .autocast import autocast_inputs, autocast_op
from .binary import maximum, minimum
from .cast import widened
from .dispatch import unary
from .elementwise import where
from .gather import gather
from .registry import (
    EXACT,
    ROUNDS_ONCE,
    TRANSCENDENTAL,
    Op,
    Spec,
    declare,
    implements,
    register,
)

MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


_ALL_AXES = [tuple(range(n)) for n in range(33)]


_AXES: dict = {}  # (dim, ndim) -> axes, for dims of plain ints (errors are never cached)


def axes_of(dim, ndim: int, op: str) -> tuple:
    """`dim` (None, an int, a sequence) as a sorted tuple of non-negative axes."""
    if dim is None:
        return _ALL_AXES[ndim]
    kind = dim.__class__
    if kind is int or (kind is tuple and builtins.all(d.__class__ is int for d in dim)):
        key = (dim, ndim)
        axes = _AXES.get(key)
        if axes is None:
            axes = _axes_of(dim, ndim, op)
            if len(_AXES) < 4096:
                _AXES[key] = axes
        return axes
    return _axes_of(dim, ndim, op)


def _axes_of(dim, ndim: int, op: str) -> tuple:
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    axes = tuple(sorted({_dim(d, ndim, op) for d in dims}))  # a 0-d tensor takes 0 or -1
    if not ndim:
        return ()
    if len(axes) != len(dims) and ndim:
        raise ShapeError(f"{op}: dim {dim} repeats a dimension")
    return axes


def kept_shape(shape: tuple, axes: tuple) -> tuple:
    """`shape` with the reduced axes set to 1 (the keepdim shape)."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _expand_back(grad: Tensor, node) -> Tensor:
    """A reduction's output gradient broadcast back over the input's shape."""
    shape = node.shapes[0]
    if not node.params["keepdims"]:
        grad = grad.reshape(kept_shape(shape, node.params["axes"]))
    return grad.expand(shape)


@register
class Sum(Op):
    name = "sum"
    spec = Spec(samples.REDUCE, second_order=True, half_tol=ROUNDS_ONCE)

    @staticmethod
    def forward(b, x, axes, keepdims):
        return b.sum(x, axes, keepdims)

    @staticmethod
    def backward(node, grad):
        return _expand_back(grad, node)


@implements(Sum)
def sum(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A001
    """Sum over `dim` (all dims by default). Integer and bool tensors sum to int64.

    >>> import ndlite
    >>> ndlite.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(dim=0).tolist()
    [4.0, 6.0]
    """
    if amp.on:  # sum records inline: autocast's hook is here
        x = autocast_inputs(Sum, (x,))[0]
    axes = axes_of(dim, len(x._data.shape), "sum")
    if dtype is not None:
        x = x.to(dtype)
    elif not is_floating(x._data.dtype):
        x = x.to(int64)
    # the hottest reduction (every unbroadcast in a backward pass): called directly, not
    # through unary's keyword packing
    keepdim = keepdim is True or bool(keepdim)
    backend = x._backend
    out = Tensor._make(Sum.forward(backend, x._data, axes, keepdim), backend)
    if x._rg and graph.mode.enabled:
        graph.record(Sum, (x,), out, {"axes": axes, "keepdims": keepdim})
    return out


def _count(x: Tensor, axes: tuple) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@widened
def mean(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Mean over `dim` (all dims by default); floating tensors only, as in PyTorch (`dtype`
    casts the input first, integers too)."""
    if dtype is not None:
        x = x.to(dtype)
    if not is_floating(x.dtype):
        raise DTypeError(f"mean: needs a floating tensor, got {x.dtype} (shape {x.shape}); "
                         "use .float() first")
    axes = axes_of(dim, x.ndim, "mean")
    return sum(x, axes, keepdim) / _count(x, axes)


@widened
def var(x: Tensor, dim=None, keepdim: bool = False, correction: int = 1,
        unbiased: bool | None = None) -> Tensor:
    """Variance over `dim` with Bessel's correction by default (`correction=1`)."""
    if unbiased is not None:
        correction = 1 if unbiased else 0
    if not is_floating(x.dtype):
        raise DTypeError(f"var: needs a floating tensor, got {x.dtype}")
    axes = axes_of(dim, x.ndim, "var")
    centered = x - mean(x, axes, keepdim=True)
    return sum(centered * centered, axes, keepdim) / builtins.max(_count(x, axes) - correction, 0)


@widened
def std(x: Tensor, dim=None, keepdim: bool = False, correction: int = 1,
        unbiased: bool | None = None) -> Tensor:
    """Standard deviation: the square root of `var` (gradient 0 where it is 0, as PyTorch's,
    not 0 * inf)."""
    return unary(_StdOfVar, var(x, dim, keepdim, correction, unbiased))


class _StdOfVar(Op):
    """sqrt of a variance, with PyTorch's std gradient: 0 where the result is 0. Not
    registered: std's spec tests it."""

    name = "std"
    save_output = True

    @staticmethod
    def forward(b, v):
        return b.sqrt(v)

    @staticmethod
    def backward(node, grad):
        out = node.output()
        return where(out == 0, 0.0, grad / where(out == 0, 1.0, 2 * out))


def _extremum_backward(node, grad, extremum):
    """Share each output gradient evenly among the extremal elements of its reduced group
    (PyTorch's amax/amin/max() rule; max(dim) sends it to its index instead)."""
    x = node.saved[0].detach()
    axes = node.params["axes"]
    best = extremum(x, axes, keepdim=True)
    ties = x == best
    count = ties.sum(axes, keepdim=True).to(x.dtype)
    return where(ties, grad.reshape(best.shape) / count, 0.0)


def _check_nonempty(x: Tensor, axes: tuple, op: str) -> None:
    if x.numel() == 0 and (not axes or builtins.any(x.shape[a] == 0 for a in axes if x.ndim)):
        raise ShapeError(f"{op}: cannot reduce over an empty dimension (shape {x.shape})")


@register
class Amax(Op):
    name = "amax"
    spec = Spec(samples.REDUCE, tol=EXACT, kinks="distinct", zero_ties=True)
    save_inputs = True

    @staticmethod
    def forward(b, x, axes, keepdims):
        return b.max(x, axes, keepdims)

    @staticmethod
    def backward(node, grad):
        return _extremum_backward(node, grad, amax)


@register
class Amin(Op):
    name = "amin"
    spec = Spec(samples.REDUCE, tol=EXACT, kinks="distinct", zero_ties=True)
    save_inputs = True

    @staticmethod
    def forward(b, x, axes, keepdims):
        return b.min(x, axes, keepdims)

    @staticmethod
    def backward(node, grad):
        return _extremum_backward(node, grad, amin)


@implements(Amax)
def amax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Maximum over `dim` (an int or tuple; all dims by default)."""
    axes = axes_of(dim, x.ndim, "amax")
    _check_nonempty(x, axes, "amax")
    return unary(Amax, x, axes=axes, keepdims=bool(keepdim))


@implements(Amin)
def amin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Minimum over `dim` (an int or tuple; all dims by default)."""
    axes = axes_of(dim, x.ndim, "amin")
    _check_nonempty(x, axes, "amin")
    return unary(Amin, x, axes=axes, keepdims=bool(keepdim))


def max(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001 - torch.max
    """`x.max()`: the largest value. `x.max(dim)`: (values, indices) along dim.
    `ndlite.max(a, b)` with a tensor `b`: the elementwise maximum.

    >>> import ndlite
    >>> v, i = ndlite.tensor([[1.0, 5.0], [7.0, 2.0]]).max(dim=1)
    >>> v.tolist(), i.tolist()
    ([5.0, 7.0], [1, 0])
    """
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    if dim is None:
        return amax(x)
    return MaxResult(*_select_along(x, dim, keepdim, argmax))


def min(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001 - torch.min
    """`x.min()`, `x.min(dim)` -> (values, indices), or `ndlite.min(a, b)` elementwise."""
    if isinstance(dim, Tensor):
        return minimum(x, dim)
    if dim is None:
        return amin(x)
    return MinResult(*_select_along(x, dim, keepdim, argmin))


def _select_along(x: Tensor, dim: int, keepdim: bool, pick) -> tuple:
    """(values, indices) of max(dim)/min(dim): the values gathered at the indices, so the
    gradient goes to the index (PyTorch's rule), not shared among ties."""
    if x.ndim == 0:
        _dim(dim, 0, pick.__name__)
        return x.clone() if x._rg else x, pick(x, dim, keepdim)
    index = pick(x, dim, keepdim=True)
    values = gather(x, dim, index)
    if not keepdim:
        values, index = values.squeeze(dim), index.squeeze(dim)
    return values, index


def _arg(x: Tensor, dim, keepdim: bool, op: str, primitive: str) -> Tensor:
    if dim is None:
        if x.numel() == 0:
            raise ShapeError(f"{op}: cannot take the {op} of an empty tensor")
        flat = x._backend.reshape(x._data, (x.numel(),))
        out = getattr(x._backend, primitive)(flat, 0, False)
        if keepdim:
            out = x._backend.reshape(out, (1,) * x.ndim)
        return Tensor._make(out, x._backend)
    axis = _dim(dim, x.ndim, op)
    _check_nonempty(x, (axis,), op)
    data = x._data if x.ndim else x._backend.reshape(x._data, (1,))
    return Tensor._make(getattr(x._backend, primitive)(data, axis, bool(keepdim) and x.ndim > 0),
                        x._backend)


def argmax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (over the flattened tensor if `dim` is None)."""
    return _arg(x, dim, keepdim, "argmax", "argmax")


def argmin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the first minimum (over the flattened tensor if `dim` is None)."""
    return _arg(x, dim, keepdim, "argmin", "argmin")


@autocast_op("logsumexp")  # outside widened: float32 in a region, not rounded back
@widened
def logsumexp(x: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x), dim)), without overflow.

    >>> import ndlite
    >>> round(ndlite.tensor([1000.0, 1000.0]).logsumexp(0).item(), 3)
    1000.693
    """
    if not is_floating(x.dtype):
        x = x.float()
    axes = axes_of(dim, x.ndim, "logsumexp")
    if x.numel() == 0:  # a sum over nothing is 0: log gives -inf, as in PyTorch
        return x.exp().sum(axes, keepdim).log()
    shift = amax(x.detach(), axes, keepdim=True)
    shift = where(shift.abs() < float("inf"), shift, 0.0)  # an all -inf row stays -inf
    out = (x - shift).exp().sum(axes, keepdim=True).log() + shift
    if not keepdim:
        out = out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))
    return out


def all(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether every element (along `dim`) is true/nonzero."""
    b = x if x.dtype is bool_ else x != 0
    axes = axes_of(dim, x.ndim, "all")
    if b.numel() == 0:
        return creation.ones(kept_shape(x.shape, axes) if keepdim else
                    tuple(n for i, n in enumerate(x.shape) if i not in axes),
                    dtype=bool_, backend=x._backend)
    return Tensor._make(x._backend.min(b._data, axes, bool(keepdim)), x._backend)


def any(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether some element (along `dim`) is true/nonzero."""
    b = x if x.dtype is bool_ else x != 0
    axes = axes_of(dim, x.ndim, "any")
    if b.numel() == 0:
        return creation.zeros(kept_shape(x.shape, axes) if keepdim else
                     tuple(n for i, n in enumerate(x.shape) if i not in axes),
                     dtype=bool_, backend=x._backend)
    return Tensor._make(x._backend.max(b._data, axes, bool(keepdim)), x._backend)


declare("mean", Spec(samples.REDUCE, second_order=True), mean)
declare("var", Spec(samples.REDUCE, tol=TRANSCENDENTAL, params={"min_count": 2}), var)
declare("std", Spec(samples.REDUCE, tol=TRANSCENDENTAL, kinks="distinct",
                   params={"min_count": 2}), std)
declare("logsumexp", Spec(samples.REDUCE, tol=TRANSCENDENTAL, params={"dim_required": True}),
        logsumexp)
declare("argmax", Spec(samples.REDUCE, tol=EXACT, grad=False, params={"single_dim": True}), argmax)
declare("argmin", Spec(samples.REDUCE, tol=EXACT, grad=False, params={"single_dim": True}), argmin)

