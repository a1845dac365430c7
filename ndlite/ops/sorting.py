"""Sorting and scans: sort (stable, either direction), argsort, topk, kthvalue, median,
cumsum, cumprod and prod.

The order comes from the optional primitive `argsort(x, axis, descending)` (stable: equal
values keep their order, as `torch.sort(stable=True)`), and the values are a differentiable
`gather` at it, so the gradient of a sort goes back to where each value came from. The scans
are `cumulative(name, x, axis)`; cumsum's gradient is the reversed cumsum of the gradient.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..creation import tensor
from ..dtypes import int64, is_floating
from ..errors import DTypeError, ShapeError
from ..graph import mode
from ..tensor import Tensor
from .autocast import autocast_op
from .dispatch import unary
from .elementwise import where
from .gather import gather
from .join import narrow
from .movement import reshape, squeeze
from .registry import EXACT, TRANSCENDENTAL, Spec, declare, define, implements
from .samples import SCAN, SORT

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])


def _axis(x: Tensor, dim: int, op: str) -> int:
    n = max(x.ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {x.ndim} dims "
                         f"(shape {x.shape})")
    return dim % n


def _flat(x: Tensor) -> Tensor:
    return reshape(x, (1,)) if x.ndim == 0 else x


def argsort(input: Tensor, dim: int = -1, descending: bool = False,
            stable: bool = False) -> Tensor:
    """The int64 indices that sort `input` along `dim` (always stable in ndlite)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"argsort: expected a tensor, got {type(input).__name__}")
    axis = _axis(input, dim, "argsort")
    x = _flat(input)
    out = Tensor._make(x._backend.argsort(x._data, axis, bool(descending)), x._backend)
    return reshape(out, ()) if input.ndim == 0 else out


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """(values, indices) of `input` sorted along `dim`; ties keep their order.

    >>> import ndlite
    >>> v, i = ndlite.sort(ndlite.tensor([3.0, 1.0, 2.0]), descending=True)
    >>> v.tolist(), i.tolist()
    ([3.0, 2.0, 1.0], [0, 2, 1])
    """
    index = argsort(input, dim, descending)
    if input.ndim == 0:
        return SortResult(input * 1, index)
    return SortResult(gather(input, index, _axis(input, dim, "sort")), index)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The k largest (or smallest) values along `dim` and their indices, in order."""
    axis = _axis(input, dim, "topk")
    n = input.shape[axis] if input.ndim else 1
    if not 0 <= k <= n:
        raise ShapeError(f"topk: k={k} is out of range for dim {dim} of size {n} "
                         f"(shape {input.shape})")
    values, index = sort(input, axis, descending=largest)
    if input.ndim == 0:
        return TopkResult(values, index)
    return TopkResult(narrow(values, axis, 0, k), narrow(index, axis, 0, k))


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """The k-th smallest value (k from 1) along `dim`, and its index."""
    axis = _axis(input, dim, "kthvalue")
    n = input.shape[axis] if input.ndim else 1
    if not 1 <= k <= n:
        raise ShapeError(f"kthvalue: k={k} is out of range for dim {dim} of size {n}")
    values, index = sort(_flat(input), axis)
    values, index = narrow(values, axis, k - 1, 1), narrow(index, axis, k - 1, 1)
    if not keepdim or input.ndim == 0:
        values, index = squeeze(values, axis), squeeze(index, axis)
    return KthvalueResult(values, index)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """The lower median: of all elements (a 0-d tensor) or along `dim` (values, indices)."""
    if dim is None:
        flat = reshape(input, (-1,))
        if flat.shape[0] == 0:
            raise ShapeError("median: the tensor is empty")
        return kthvalue(flat, (flat.shape[0] + 1) // 2, 0).values
    axis = _axis(input, dim, "median")
    n = input.shape[axis] if input.ndim else 1
    values, index = kthvalue(input, (n + 1) // 2, axis, keepdim)
    return MedianResult(values, index)


# ---- scans ------------------------------------------------------------------------------------


def _reverse_cumsum(grad: Tensor, axis: int) -> Tensor:
    return grad.flip(axis).cumsum(axis).flip(axis)


def _cumprod_grad(node, grad):
    """sum over j >= i of grad_j * d out_j / d x_i, zeros included (PyTorch's): before the
    first zero of a line, sum_j grad_j * out_j / x_i; at the first zero, the same sum with
    that zero read as 1 (the products of the others); after it, 0. Dividing by x alone gave
    0 / 0 = NaN at every zero (prod of a row with a zero, too)."""
    axis = node.params["axis"]
    x, out = node.saved[0], node.output()
    if mode.enabled:  # a graph of the gradient: the form that stays a function of every x
        return _cumprod_grad_graph(x, grad, axis)
    zero = x == 0
    seen = zero.to(x.dtype).cumsum(axis)  # zeros up to and including each position
    before = seen == 0
    first = zero.logical_and(seen == 1)
    safe = where(zero, 1.0, x)
    plain = _reverse_cumsum(grad * out, axis) / safe
    at_first = _reverse_cumsum(grad * where(first, 1.0, x).cumprod(axis), axis)
    return where(before, plain, where(first, at_first, 0.0))


def _cumprod_grad_graph(x: Tensor, grad: Tensor, axis: int) -> Tensor:
    """The same gradient as products written out, for create_graph: row i of
    C = cumprod(x with x_i read as 1) is prod_{k <= j, k != i} x_k, so the gradient is
    sum_{j >= i} grad_j C[i, j], each term a product of the other x (a zero's second
    derivative too). Lines of n cost n^2: used only when differentiating again."""
    xs, gs = x.movedim(axis, -1), grad.movedim(axis, -1)
    n = xs.shape[-1]
    eye = tensor(np.eye(n, dtype=bool), backend=x._backend)
    later = tensor(np.triu(np.ones((n, n), dtype=bool)), backend=x._backend)  # j >= i
    spread = xs.unsqueeze(-2).expand(*xs.shape[:-1], n, n)
    products = where(eye, 1.0, spread).cumprod(-1)
    terms = where(later, products * gs.unsqueeze(-2), 0.0)
    return terms.sum(-1).movedim(-1, axis)


Cumsum = define("cumsum", lambda b, x, axis: b.cumulative("cumsum", x, axis),
                lambda n, g: _reverse_cumsum(g, n.params["axis"]),
                spec=Spec(SCAN), dtype_rule="no_bool")
Cumprod = define("cumprod", lambda b, x, axis: b.cumulative("cumprod", x, axis), _cumprod_grad,
                 save="inputs+output", spec=Spec(SCAN, tol=TRANSCENDENTAL, kinks="zero",
                                                 domain=(-1.5, 1.5)), dtype_rule="no_bool")


def _scan(op, input: Tensor, dim: int, dtype) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op.name}: expected a tensor, got {type(input).__name__}")
    if input.dtype.kind == "b" or (input.dtype.kind in "iu" and dtype is None):
        input = input.to(int64)  # PyTorch sums integers and bools in int64
    if dtype is not None:
        input = input.to(dtype)
    axis = _axis(input, dim, op.name)
    out = unary(op, _flat(input), axis=axis)
    return reshape(out, ()) if input.ndim == 0 else out


@implements(Cumsum)
def cumsum(input: Tensor, dim: int, dtype=None) -> Tensor:
    """Running sums along `dim`.

    >>> import ndlite
    >>> ndlite.cumsum(ndlite.tensor([1, 2, 3]), 0).tolist()
    [1, 3, 6]
    """
    return _scan(Cumsum, input, dim, dtype)


@implements(Cumprod)
def cumprod(input: Tensor, dim: int, dtype=None) -> Tensor:
    """Running products along `dim` (its gradient is PyTorch's where the input has zeros)."""
    return _scan(Cumprod, input, dim, dtype)


@autocast_op("prod")
def prod(input: Tensor, dim: int | None = None, keepdim: bool = False, dtype=None) -> Tensor:
    """The product of all elements, or along `dim` (the last running product)."""
    if dim is None:
        flat = reshape(input, (-1,))
        if flat.shape[0] == 0:
            return input.new_ones((), dtype=dtype or input.dtype)
        out = narrow(cumprod(flat, 0, dtype), 0, flat.shape[0] - 1, 1)
        return reshape(out, (1,) * input.ndim if keepdim else ())
    axis = _axis(input, dim, "prod")
    if input.ndim == 0:
        return cumprod(input, 0, dtype)
    n = input.shape[axis]
    if n == 0:
        raise ShapeError(f"prod: dim {dim} of shape {input.shape} is empty")
    out = narrow(cumprod(input, axis, dtype), axis, n - 1, 1)
    return out if keepdim else squeeze(out, axis)


def _sort_case(x, dim, descending):
    return sort(x, dim, descending)


def _check_float(x: Tensor, op: str) -> None:
    if not is_floating(x.dtype):
        raise DTypeError(f"{op}: needs a float tensor, got {x.dtype}")


declare("sort", Spec(SORT, tol=EXACT, kinks="distinct", call=_sort_case), sort)
declare("topk", Spec(SORT, tol=EXACT, kinks="distinct",
                     call=lambda x, dim, descending: topk(
                         x, min(2, x.shape[dim] if x.ndim else 1), dim, descending)), topk)
declare("prod", Spec(SCAN, tol=TRANSCENDENTAL, kinks="zero", domain=(-1.5, 1.5),
                     call=lambda x, dim: prod(x, dim)), prod)
