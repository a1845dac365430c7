"""PyTorch's composite functions that real programs reach for (`torch.lerp`, `torch.addmm`,
`x.unbind(0)`, `torch.repeat_interleave`, `torch.nonzero`, `torch.isclose`, ...), each built
from registered ops: every backend runs them, and their gradients, of any order, are those of
the ops they are made of (the kit proves those). Only nonzero reads its input back to the
host, as PyTorch's does: the size of its result depends on the values.
"""

from __future__ import annotations

import numpy as np

from ..creation import tensor, zeros
from ..dtypes import finfo, float32, float64, is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .binary import clamp, logical_and, logical_or
from .elementwise import where
from .gather import index_select
from .join import cat
from .linalg import bmm, mm
from .math import isfinite, isnan
from .unary import abs as _abs_values


def _tensor(x, op: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")


def _scaled(x: Tensor, factor) -> Tensor:
    return x if factor == 1 else x * factor


def lerp(input: Tensor, end: Tensor, weight) -> Tensor:
    """input + weight * (end - input) (torch.lerp; weight a number or a tensor).

    >>> import ndlite
    >>> ndlite.lerp(ndlite.zeros(2), ndlite.ones(2), 0.25).tolist()
    [0.25, 0.25]
    """
    _tensor(input, "lerp")
    return input + weight * (end - input)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2) (torch.addmm); with beta 0 input is not read, so
    its NaNs do not spread.

    >>> import ndlite
    >>> ndlite.addmm(ndlite.ones(2, 2), ndlite.eye(2), ndlite.eye(2), beta=2).tolist()
    [[3.0, 2.0], [2.0, 3.0]]
    """
    _tensor(input, "addmm")
    product = _scaled(mm(mat1, mat2), alpha)
    _fits(input, product, "addmm")
    return product if beta == 0 else _scaled(input, beta) + product


def _fits(input: Tensor, product: Tensor, op: str) -> None:
    """input must broadcast to the product's shape (and not widen it), as PyTorch checks."""
    try:
        widened = np.broadcast_shapes(input.shape, product.shape) != product.shape
    except ValueError:
        widened = True
    if widened:
        raise ShapeError(f"{op}: input of shape {input.shape} does not broadcast to the "
                         f"product's shape {product.shape}")


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (batch1 @ batch2) over a batch (torch.baddbmm)."""
    _tensor(input, "baddbmm")
    product = _scaled(bmm(batch1, batch2), alpha)
    _fits(input, product, "baddbmm")
    return product if beta == 0 else _scaled(input, beta) + product


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value * tensor1 * tensor2 (torch.addcmul)."""
    _tensor(input, "addcmul")
    return input + _scaled(tensor1 * tensor2, value)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """input + value * tensor1 / tensor2 (torch.addcdiv; floats only, as PyTorch's).

    >>> import ndlite
    >>> ndlite.addcdiv(ndlite.zeros(2), ndlite.ones(2), ndlite.full((2,), 4.0), value=2).tolist()
    [0.5, 0.5]
    """
    _tensor(input, "addcdiv")
    if not (is_floating(tensor1.dtype) and is_floating(tensor2.dtype)):
        raise DTypeError(f"addcdiv: integer division with addcdiv is not supported, got "
                         f"{tensor1.dtype} and {tensor2.dtype}; use floats")
    return input + _scaled(tensor1 / tensor2, value)


def clamp_min(input: Tensor, min) -> Tensor:  # noqa: A002 - PyTorch's name
    return clamp(input, min, None)


def clamp_max(input: Tensor, max) -> Tensor:  # noqa: A002 - PyTorch's name
    return clamp(input, None, max)


def unbind(input: Tensor, dim: int = 0) -> tuple:
    """The slices of `input` along `dim`, that dim removed (torch.unbind).

    >>> import ndlite
    >>> [t.tolist() for t in ndlite.arange(4.0).reshape(2, 2).unbind(1)]
    [[0.0, 2.0], [1.0, 3.0]]
    """
    _tensor(input, "unbind")
    if not input.ndim:
        raise ShapeError("unbind: a 0-d tensor has no dim to unbind")
    d = _dim(dim, input.ndim, "unbind")
    lead = (slice(None),) * d
    return tuple(input[lead + (i,)] for i in range(input.shape[d]))


def _dim(dim: int, ndim: int, op: str) -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dims")
    return dim % ndim


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D tensor as the `diagonal`-th diagonal of a square matrix, or a matrix's
    `diagonal`-th diagonal as a 1-D tensor (torch.diag).

    >>> import ndlite
    >>> ndlite.diag(ndlite.tensor([1.0, 2.0]), 1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    """
    _tensor(input, "diag")
    k = int(diagonal)
    if input.ndim == 1:
        n = input.shape[0]
        size = n + abs(k)
        rows, cols = np.arange(n) + max(-k, 0), np.arange(n) + max(k, 0)
        out = zeros(size, size, dtype=input.dtype, backend=input.backend)
        if n:
            out[tensor(rows, backend=input.backend), tensor(cols, backend=input.backend)] = input
        return out
    if input.ndim != 2:
        raise ShapeError(f"diag: expected a 1-D or 2-D tensor, got shape {input.shape}")
    rows, cols = input.shape
    n = max(0, min(rows - max(-k, 0), cols - max(k, 0)))
    r, c = np.arange(n) + max(-k, 0), np.arange(n) + max(k, 0)
    return input[tensor(r, backend=input.backend), tensor(c, backend=input.backend)]


def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each element (each slice along `dim`) repeated `repeats` times in place, where
    Tensor.repeat tiles the whole (torch.repeat_interleave); with a tensor of counts alone,
    the indices repeated by them.

    >>> import ndlite
    >>> ndlite.tensor([1, 2]).repeat_interleave(2).tolist()
    [1, 1, 2, 2]
    """
    _tensor(input, "repeat_interleave")
    if repeats is None:  # repeat_interleave(counts): arange(len) repeated by the counts
        counts = _counts(input, input.shape[0] if input.ndim == 1 else -1)
        return tensor(np.repeat(np.arange(len(counts)), counts), backend=input.backend)
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = _dim(dim, input.ndim, "repeat_interleave")
    n = input.shape[d]
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        counts = _counts(repeats, n)
    else:
        r = int(repeats.item() if isinstance(repeats, Tensor) else repeats)
        if r < 0:
            raise ValueError(f"repeat_interleave: repeats must be >= 0, got {r}")
        shape = input.shape
        spread = input.unsqueeze(d + 1).expand(*shape[:d + 1], r, *shape[d + 1:])
        return spread.reshape(*shape[:d], n * r, *shape[d + 1:])
    index = tensor(np.repeat(np.arange(n), counts), backend=input.backend)
    if output_size is not None and output_size != len(index):
        raise ValueError(f"repeat_interleave: output_size {output_size} but the repeats sum "
                         f"to {len(index)}")
    return index_select(input, d, index)


def _counts(repeats: Tensor, n: int) -> np.ndarray:
    counts = repeats.numpy() if not repeats.requires_grad else repeats.detach().numpy()
    if counts.ndim != 1 or counts.dtype.kind not in "iu":
        raise DTypeError(f"repeat_interleave: repeats must be a 1-D integer tensor, got "
                         f"{repeats.dtype} of shape {repeats.shape}")
    if n >= 0 and len(counts) != n:
        raise ShapeError(f"repeat_interleave: {len(counts)} repeats for a dim of size {n}")
    if (counts < 0).any():
        raise ValueError("repeat_interleave: repeats must be >= 0")
    return counts


def nonzero(input: Tensor, *, as_tuple: bool = False):
    """The indices of the nonzero elements, one row each (torch.nonzero): an int64 tensor of
    shape (count, ndim), or with `as_tuple` one 1-D tensor per dim. Reads the input back.

    >>> import ndlite
    >>> ndlite.nonzero(ndlite.tensor([[0, 3], [4, 0]])).tolist()
    [[0, 1], [1, 0]]
    """
    _tensor(input, "nonzero")
    values, where_ = input.detach().numpy(), input.backend
    if values.ndim == 0:  # PyTorch: one element, and a row of no indices when it is nonzero
        hit = int(values != 0)
        return ((tensor(np.zeros(hit, np.int64), backend=where_),) if as_tuple else
                tensor(np.zeros((hit, 0), np.int64), backend=where_))
    found = np.nonzero(values)
    if as_tuple:
        return tuple(tensor(i.astype(np.int64), backend=where_) for i in found)
    return tensor(np.stack(found, axis=1).astype(np.int64), backend=where_)


def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """|input - other| <= atol + rtol * |other| elementwise, equal infinities included, NaN
    equal to NaN only with `equal_nan` (torch.isclose).

    >>> import ndlite
    >>> ndlite.isclose(ndlite.tensor([1.0, 1.1]), ndlite.tensor([1.0, 1.0])).tolist()
    [True, False]
    """
    _tensor(input, "isclose")
    if not isinstance(other, Tensor):
        other = tensor(other, dtype=input.dtype, backend=input.backend)
    close = input == other
    if not (is_floating(input.dtype) or is_floating(other.dtype)):  # PyTorch: the same test
        wide = float64 if np.dtype("float64") in input.backend.dtypes else float32
        input, other = input.to(wide), other.to(wide)
    if equal_nan:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    diff = _abs_values(input - other)
    within = logical_and(isfinite(diff), diff <= atol + rtol * _abs_values(other))
    return logical_or(close, within)


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default 0 and the
    dtype's largest and lowest finite values; torch.nan_to_num); the gradient passes where
    the input is finite.

    >>> import ndlite
    >>> ndlite.nan_to_num(ndlite.tensor([float("nan"), 1.0]), nan=-1.0).tolist()
    [-1.0, 1.0]
    """
    _tensor(input, "nan_to_num")
    if not is_floating(input.dtype):
        return input.clone()
    info = finfo(input.dtype)
    high = float(info.max) if posinf is None else posinf
    low = float(info.min) if neginf is None else neginf
    inf = float("inf")
    out = where(input == inf, high, input)
    out = where(input == -inf, low, out)
    return where(isnan(input), nan, out)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of `input` where `mask` (broadcast together) is true, as a 1-D tensor
    (torch.masked_select)."""
    _tensor(input, "masked_select")
    if str(mask.dtype) != "bool":
        raise DTypeError(f"masked_select: expected a bool mask, got {mask.dtype}")
    try:
        shape = np.broadcast_shapes(input.shape, mask.shape)
    except ValueError:
        raise ShapeError(f"masked_select: input of shape {input.shape} and mask of shape "
                         f"{mask.shape} cannot be broadcast together") from None
    return input.broadcast_to(shape)[mask.broadcast_to(shape)]


def vstack(tensors) -> Tensor:
    """1-D tensors as rows, others joined along dim 0 (torch.vstack)."""
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


def hstack(tensors) -> Tensor:
    """Joined along dim 1, or dim 0 for 1-D (and 0-d) tensors (torch.hstack)."""
    tensors = [t.reshape(1) if t.ndim == 0 else t for t in tensors]
    return cat(tensors, 0 if tensors and tensors[0].ndim == 1 else 1)
