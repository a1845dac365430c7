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
    """`x` restricted to `index` along `dim`."""
    if not isinstance(index, Tensor):
        index = Tensor._make(x._backend.from_numpy(np.asarray(index, dtype=np.int64)),
                             x._backend)
    return take(x, index, dim)


