"""More of PyTorch's reductions and shape helpers, composed from registered ops (so every
backend, and gradients where PyTorch has them): nansum, nanmean, count_nonzero, aminmax,
var_mean, std_mean, quantile, broadcast_tensors, atleast_1d/2d/3d, dstack, column_stack, mv,
vdot; and histc, counted on the host as a histogram is.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..creation import tensor
from ..dtypes import int64, is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .composite import _dim, _tensor
from .elementwise import where
from .join import cat
from .linalg import matmul
from .math import isnan
from .reduce import amax, amin, mean, std, sum, var

MinMax = namedtuple("aminmax", ["min", "max"])


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The sum with NaNs read as 0 (their gradient is 0)."""
    _tensor(input, "nansum")
    x = where(isnan(input), 0.0, input) if is_floating(input.dtype) else input
    return sum(x, dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean of the values that are not NaN (NaN where every value is).

    >>> import ndlite
    >>> ndlite.nanmean(ndlite.tensor([1.0, float("nan"), 3.0])).item()
    2.0
    """
    _tensor(input, "nanmean")
    if dtype is not None:
        input = input.to(dtype)
    if not is_floating(input.dtype):
        raise DTypeError(f"nanmean: needs a floating tensor, got {input.dtype}")
    present = (~isnan(input)).to(input.dtype)
    return nansum(input, dim, keepdim) / sum(present, dim, keepdim)


def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """How many elements are not zero, over `dim` (all by default), as int64."""
    _tensor(input, "count_nonzero")
    return sum((input != 0).to(int64), dim)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False):
    """(min, max) over `dim` (all elements by default), a named tuple."""
    _tensor(input, "aminmax")
    return MinMax(amin(input, dim, keepdim), amax(input, dim, keepdim))


def var_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: int | None = None):
    """(var, mean) over `dim`, Bessel's correction by default."""
    c = correction if correction is not None else (0 if unbiased is False else 1)
    return var(input, dim, keepdim, correction=c), mean(input, dim, keepdim)


def std_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: int | None = None):
    """(std, mean) over `dim`, Bessel's correction by default."""
    c = correction if correction is not None else (0 if unbiased is False else 1)
    return std(input, dim, keepdim, correction=c), mean(input, dim, keepdim)


_INTERPOLATIONS = ("linear", "lower", "higher", "nearest", "midpoint")


def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The q-quantiles over `dim` (all elements by default): between the sorted values at
    floor and ceil of q (n - 1), by `interpolation`; a tensor of several q puts them first.
    NaN where the reduced values hold a NaN, as PyTorch's (torch.quantile).

    >>> import ndlite
    >>> ndlite.quantile(ndlite.tensor([1.0, 2.0, 3.0, 4.0]), 0.5).item()
    2.5
    """
    _tensor(input, "quantile")
    if not is_floating(input.dtype):
        raise DTypeError(f"quantile: needs a floating tensor, got {input.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"quantile: interpolation must be one of {_INTERPOLATIONS}, got "
                         f"{interpolation!r}")
    qs = np.atleast_1d(q.detach().numpy() if isinstance(q, Tensor) else np.asarray(q, float))
    if qs.ndim != 1 or ((qs < 0) | (qs > 1)).any():
        raise ValueError(f"quantile: q must be a number or 1-D tensor in [0, 1], got {q}")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _dim(dim, input.ndim, "quantile")
    n = x.shape[d]
    if n == 0:
        raise ShapeError(f"quantile: dim {dim} of shape {input.shape} is empty")
    ordered = x.sort(d).values
    nan_any = isnan(x).any(d, keepdim=True)
    outs = []
    for value in qs:
        pos = float(value) * (n - 1)
        low, high = int(np.floor(pos)), int(np.ceil(pos))
        frac = pos - low
        if interpolation == "lower":
            high, frac = low, 0.0
        elif interpolation == "higher":
            low, frac = high, 0.0
        elif interpolation == "nearest":
            low = high = int(np.round(pos))  # half to even, as PyTorch's
            frac = 0.0
        elif interpolation == "midpoint":
            frac = 0.5 if high != low else 0.0
        a = ordered.narrow(d, low, 1)
        out = a if frac == 0.0 else a + (ordered.narrow(d, high, 1) - a) * frac
        outs.append(where(nan_any, float("nan"), out))
    out = cat(outs, d).movedim(d, 0)  # the q in place of the reduced dim, then first
    if keepdim:
        kept = (1,) * input.ndim if dim is None else \
            input.shape[:d] + (1,) + input.shape[d + 1:]
        out = out.reshape((len(qs),) + kept)
    scalar_q = not isinstance(q, Tensor) and np.ndim(q) == 0 or (
        isinstance(q, Tensor) and q.ndim == 0)
    return out.squeeze(0) if scalar_q else out


def histc(input: Tensor, bins: int = 100, min: float = 0.0, max: float = 0.0) -> Tensor:  # noqa: A002
    """A histogram of `bins` equal bins over [min, max] (the data's range when both are 0),
    values outside left out, the last bin closed (torch.histc; counted on the host)."""
    _tensor(input, "histc")
    values = input.detach().numpy().reshape(-1).astype(np.float64)
    low, high = float(min), float(max)
    if low == high:
        low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if low == high:
        low, high = low - 1, high + 1  # PyTorch widens an empty range by 1 each way
    if low > high:
        raise ValueError(f"histc: min {min} is above max {max}")
    counts, _ = np.histogram(values, bins=int(bins), range=(low, high))
    dtype = input.dtype if is_floating(input.dtype) else "float32"
    return tensor(counts.astype(np.float64), backend=input.backend).to(dtype)


def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded to their common broadcast shape (views)."""
    shape = np.broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


def _at_least(n: int, tensors):
    def one(t: Tensor) -> Tensor:
        if t.ndim >= n:
            return t
        if n == 3 and t.ndim == 2:
            return t.unsqueeze(-1)
        if n == 3 and t.ndim == 1:
            return t.reshape(1, -1, 1)
        return t.reshape((1,) * (n - t.ndim) + t.shape)

    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    out = tuple(one(t) for t in tensors)
    return out[0] if len(out) == 1 else out


def atleast_1d(*tensors):
    return _at_least(1, tensors)


def atleast_2d(*tensors):
    return _at_least(2, tensors)


def atleast_3d(*tensors):
    return _at_least(3, tensors)


def dstack(tensors) -> Tensor:
    """Joined along the third dim, after atleast_3d (torch.dstack)."""
    return cat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors) -> Tensor:
    """1-D (and 0-d) tensors as columns, others joined along dim 1 (torch.column_stack)."""
    return cat([t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors], 1)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix times vector (torch.mv)."""
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv: expected a matrix and a vector, got shapes {input.shape} and "
                         f"{vec.shape}")
    return matmul(input, vec)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors (real: no conjugate)."""
    if input.ndim != 1 or other.ndim != 1 or input.shape != other.shape:
        raise ShapeError(f"vdot: expected two 1-D tensors of one size, got {input.shape} and "
                         f"{other.shape}")
    return sum(input * other)
