"""Gather and its adjoint: `gather`, `scatter_add`, `take` and `index_select`.

Indices are checked against the shape on the host before anything reaches the device (a GPU
would otherwise read out of bounds). The adjoint of gather is scatter_add, which backends
compute without atomics, so results are reproducible.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import int64
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor, _dim
from . import samples
from .dispatch import nary
from .movement import basic_slice, reshape
from .registry import EXACT, SCALED, Op, Spec, implements, register

# ---- gather, scatter_add, take ----------------------------------------------------------------


@register
class Gather(Op):
    name = "gather"
    spec = Spec(samples.GATHER, tol=EXACT)

    @staticmethod
    def forward(b, x, index, axis):
        return b.gather(x, index, axis)

    @staticmethod
    def backward(node, grad):
        index = node.saved[1]
        axis = node.params["axis"]
        return scatter_add(index, grad, axis, node.shapes[0][axis]), None

    save_inputs = (1,)  # the index only


@register
class ScatterAdd(Op):
    name = "scatter_add"
    spec = Spec(samples.SCATTER_ADD, tol=SCALED)  # repeated indices sum: rounding, not selection
    save_inputs = True

    @staticmethod
    def forward(b, index, values, axis, size):
        return b.scatter_add(index, values, axis, size)

    @staticmethod
    def backward(node, grad):
        index = node.saved[0]
        shape = list(node.shapes[1])
        shape[node.params["axis"]] = index.shape[node.params["axis"]]
        return None, gather(grad, node.params["axis"], index.expand(shape))


def _check_index(index: Tensor, size: int, op: str, shape) -> None:
    if index.dtype.kind not in "iu":
        raise DTypeError(f"{op}: index must be an integer tensor, got {index.dtype}")
    if index.numel():
        host = index._backend.to_numpy(index._data)
        lo, hi = int(host.min()), int(host.max())
        if lo < 0 or hi >= size:
            raise IndexError(f"{op}: index {lo if lo < 0 else hi} is out of bounds for a dim of "
                             f"size {size} (shape {shape})")


@implements(Gather)
def gather(x: Tensor, dim, index=None) -> Tensor:
    """torch.gather(input, dim, index): `out[i][j] = x[i][index[i][j]]` for dim 1. The result
    has index's shape; index has x's number of dims and sizes at most x's off `dim`. (The
    older order `gather(x, index, dim)` is accepted too.)

    >>> import ndlite
    >>> x = ndlite.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> ndlite.gather(x, 1, ndlite.tensor([[1], [0]])).tolist()
    [[2.0], [3.0]]
    """
    if isinstance(dim, Tensor):  # gather(x, index, dim)
        dim, index = index, dim
    if not isinstance(index, Tensor):
        raise TypeError(f"gather: index must be a tensor, got {type(index).__name__}")
    if x.ndim == 0 or index.ndim == 0:
        if x.ndim > 1 or index.ndim > 1:
            raise ShapeError(f"gather: index of shape {index.shape} does not fit input of "
                             f"shape {x.shape}")
        _dim(dim, x.ndim, "gather")
        return gather(x.reshape(-1), 0, index.reshape(-1)).reshape(index.shape)
    axis = _dim(dim, x.ndim, "gather")
    if index.ndim != x.ndim or any(i > a for d, (i, a) in
                                   enumerate(zip(index.shape, x.shape)) if d != axis):
        raise ShapeError(f"gather: index of shape {index.shape} does not fit input of shape "
                         f"{x.shape} along dim {dim} (index sizes must be at most the "
                         "input's off that dim)")
    _check_index(index, x.shape[axis], "gather", x.shape)
    if any(i != a for d, (i, a) in enumerate(zip(index.shape, x.shape)) if d != axis):
        x = basic_slice(x, tuple(slice(0, x.shape[d] if d == axis else n, 1)
                                 for d, n in enumerate(index.shape)))
    index = index.to(int64)
    return nary(Gather, [x, index], axis=axis)


@implements(ScatterAdd)
def scatter_add(index: Tensor, values: Tensor, dim: int, size: int) -> Tensor:
    """The adjoint of gather: zeros of `values.shape` with `size` along `dim`, plus
    `out[..., index[..., j, ...], ...] += values[..., j, ...]` (deterministic)."""
    axis = _dim(dim, values.ndim, "scatter_add")
    if index.ndim != values.ndim or any(i != v and i != 1 for i, v in
                                        zip(index.shape, values.shape)):
        raise ShapeError(f"scatter_add: index of shape {index.shape} does not fit values of "
                         f"shape {values.shape}")
    _check_index(index, size, "scatter_add", values.shape)
    index = index.to(int64)
    return nary(ScatterAdd, [index, values], axis=axis, size=int(size))


def take(x: Tensor, index: Tensor, dim: int) -> Tensor:
    """The slices of `x` at the 1-D `index` along `dim` (torch.index_select)."""
    axis = _dim(dim, x.ndim, "take")
    if index.ndim != 1:
        raise ShapeError(f"take: index must be 1-D, got shape {index.shape}")
    shape = [1] * x.ndim
    shape[axis] = index.shape[0]
    index = reshape(index, tuple(shape))
    sizes = list(x.shape)
    sizes[axis] = index.shape[axis]
    return gather(x, axis, index.expand(sizes))


def index_select(x: Tensor, dim: int, index) -> Tensor:
    """`x` restricted to `index` along `dim`. Rows of a 2-D table (embedding's lookup) are
    one op whose gradient is the backend's embedding_grad: a sorted segment sum."""
    if not isinstance(index, Tensor):
        index = Tensor._make(x._backend.from_numpy(np.asarray(index, dtype=np.int64)),
                             x._backend)
    if x.ndim == 2 and index.ndim == 1 and _dim(dim, 2, "index_select") == 0:
        _check_index(index, x.shape[0], "index_select", x.shape)
        return select_rows(x, index)
    return take(x, index, dim)


def select_rows(x: Tensor, index: Tensor) -> Tensor:
    """x[index] for a 2-D x and a 1-D integer index the caller has checked to be in range
    (embedding checks its indices once, on the host, for its own message)."""
    return nary(SelectRows, [x, index.to(int64)])


# ---- rows of a table and their gradient -------------------------------------------------------


def _table(x: Tensor, dim: int) -> Tensor:
    """A TAKE or SCATTER_ADD sample as a 2-D table whose rows run along `dim`."""
    t = x.transpose(0, dim) if x.ndim >= 2 else x.reshape(-1, 1)
    return t.reshape(t.shape[0], int(np.prod(t.shape[1:], dtype=np.int64)))


def _segment_case(index: Tensor, values: Tensor, dim: int, size: int) -> Tensor:
    """A SCATTER_ADD sample as embedding_grad's (grad (N, D), index (N,), rows)."""
    table = _table(index, dim)
    column = table[:, 0] if table.shape[1] else table.sum(1)  # index is 0 where D is 0
    return embedding_grad(_table(values, dim), column, size)


def _rows_case(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """A TAKE sample as rows of a 2-D table."""
    return index_select(_table(x, dim), 0, index)


@register
class SelectRows(Op):
    """x[index] for a 2-D x and a 1-D int64 index (checked)."""

    name = "select_rows"
    spec = Spec(samples.TAKE, tol=EXACT, call=_rows_case)
    save_inputs = (1,)

    @staticmethod
    def forward(b, x, index):
        return b.gather(x, b.reshape(index, (index.shape[0], 1)), 0)

    @staticmethod
    def backward(node, grad):
        return nary(EmbeddingGrad, [grad, node.saved[1]], num_rows=node.shapes[0][0]), None


@register
class EmbeddingGrad(Op):
    """The adjoint of select_rows: row r sums grad[i] over index[i] == r (deterministic)."""

    name = "embedding_grad"
    spec = Spec(samples.SCATTER_ADD, tol=SCALED, call=_segment_case)
    save_inputs = (1,)

    @staticmethod
    def forward(b, grad, index, num_rows):
        return b.embedding_grad(grad, index, num_rows)

    @staticmethod
    def backward(node, grad):
        return nary(SelectRows, [grad, node.saved[1]]), None


def embedding_grad(grad: Tensor, index: Tensor, num_rows: int) -> Tensor:
    """(num_rows, D): row r is the sum of grad (N, D)'s rows i with index[i] == r (index (N,),
    in range), on the backend's embedding_grad fast path."""
    if grad.ndim != 2 or index.shape != grad.shape[:1]:
        raise ShapeError(f"embedding_grad: expected grad (N, D) and index (N,), got shapes "
                         f"{grad.shape} and {index.shape}")
    _check_index(index, num_rows, "embedding_grad", grad.shape)
    return nary(EmbeddingGrad, [grad, index.to(int64)], num_rows=int(num_rows))


