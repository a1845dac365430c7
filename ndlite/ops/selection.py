"""Shape and selection ops PyTorch programs use, composed from the ops below them (so their
gradients come from those): tril/triu, masked_fill, repeat/tile, roll, flip, outer, meshgrid,
one_hot, scatter/scatter_add with PyTorch's (dim, index, src) signature, and vector norms.
"""

from __future__ import annotations

import numpy as np

from .. import graph
from ..creation import tensor as make_tensor
from ..dtypes import bool_, int64, is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .autocast import autocast_op
from .cast import widened
from .elementwise import where
from .gather import gather
from .gather import scatter_add as _scatter_add_adjoint
from .indexing import copy_, getitem
from .join import cat, narrow, pad
from .movement import expand, reshape
from .reduce import amax, amin, sum
from .registry import EXACT, TRANSCENDENTAL, Spec, declare
from .samples import BINARY, REDUCE, UNARY, WHERE


def _dim(dim: int, ndim: int, op: str) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dims")
    return dim % max(ndim, 1)


def _triangle(x: Tensor, diagonal: int, op: str, lower: bool) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"{op}: needs a tensor of at least 2 dims, got shape {x.shape}")
    rows, cols = x.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset <= diagonal if lower else offset >= diagonal
    mask = make_tensor(keep, backend=x._backend)
    return where(mask, x, 0)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (elements above `diagonal` set to 0).

    >>> import ndlite
    >>> ndlite.tril(ndlite.ones(2, 2)).tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    return _triangle(input, diagonal, "tril", lower=True)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (elements below `diagonal` set to 0)."""
    return _triangle(input, diagonal, "triu", lower=False)


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """`value` where `mask` (bool, broadcastable to input) is true, else input.

    >>> import ndlite
    >>> x = ndlite.zeros(3)
    >>> x.masked_fill(ndlite.tensor([True, False, True]), -1.0).tolist()
    [-1.0, 0.0, -1.0]
    """
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        raise DTypeError(f"masked_fill: mask must be a bool tensor, got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got shape "
                             f"{value.shape}")
        value = value.to(input.dtype)
    out = where(mask, value, input)
    if out.shape != input.shape:
        raise ShapeError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the "
                         f"input's shape {input.shape}")
    return out


def masked_fill_(input: Tensor, mask: Tensor, value) -> Tensor:
    """masked_fill in place."""
    return copy_(input, masked_fill(input, mask, value))


def _sizes(sizes) -> tuple:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


def repeat(input: Tensor, *sizes) -> Tensor:
    """The tensor tiled `sizes` times along each dim (PyTorch's Tensor.repeat; `sizes` may
    have more dims than the input, which then gains leading dims).

    >>> import ndlite
    >>> ndlite.tensor([1, 2]).repeat(2, 2).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    sizes = _sizes(sizes)
    if len(sizes) < input.ndim:
        raise ShapeError(f"repeat: {len(sizes)} repeat counts for a tensor of {input.ndim} "
                         f"dims (shape {input.shape}); give at least one per dim")
    if any(not isinstance(r, (int, np.integer)) or r < 0 for r in sizes):
        raise ValueError(f"repeat: counts must be non-negative ints, got {sizes}")
    shape = (1,) * (len(sizes) - input.ndim) + input.shape
    x = reshape(input, tuple(d for n in shape for d in (1, n)))
    x = expand(x, tuple(d for r, n in zip(sizes, shape) for d in (r, n)))
    return reshape(x, tuple(r * n for r, n in zip(sizes, shape)))


def tile(input: Tensor, dims) -> Tensor:
    """repeat, with ones prepended to `dims` when it is shorter than the input's dims."""
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Elements shifted cyclically by `shifts` along `dims` (over the flattened tensor when
    dims is None, then reshaped back).

    >>> import ndlite
    >>> ndlite.roll(ndlite.tensor([1, 2, 3]), 1).tolist()
    [3, 1, 2]
    """
    if dims is None:
        if isinstance(shifts, (tuple, list)):
            if len(shifts) != 1:
                raise ValueError("roll: without dims, shifts must be a single number")
            shifts = shifts[0]
        return reshape(roll(reshape(input, (-1,)), shifts, 0), input.shape)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    out = input
    for shift, dim in zip(shifts, dims):
        axis = _dim(dim, input.ndim, "roll")
        n = input.shape[axis]
        k = shift % n if n else 0
        if k:
            out = cat([narrow(out, axis, n - k, k), narrow(out, axis, 0, n - k)], axis)
    return out


def flip(input: Tensor, dims) -> Tensor:
    """The order of elements reversed along `dims`."""
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    axes = {_dim(d, input.ndim, "flip") for d in dims}
    if input.ndim == 0:
        return input * 1 if input.dtype.kind != "b" else input
    key = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(input.ndim))
    return getitem(input, key)


def fliplr(input: Tensor) -> Tensor:
    return flip(input, 1)


def flipud(input: Tensor) -> Tensor:
    return flip(input, 0)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two vectors: out[i, j] = input[i] * vec2[j]."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer: needs two vectors, got shapes {input.shape} and {vec2.shape}")
    return reshape(input, (-1, 1)) * reshape(vec2, (1, -1))


ger = outer


def meshgrid(*tensors, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-D tensors (indexing "ij", PyTorch's default, or "xy")."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in tensors:
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: needs 0-d or 1-D tensors, got shape {t.shape}")
    sizes = [max(t.numel(), 1) if t.ndim else 1 for t in tensors]
    if indexing == "xy" and len(tensors) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for i, t in enumerate(tensors):
        axis = i if indexing == "ij" or len(tensors) < 2 else (1 - i if i < 2 else i)
        shape = [1] * len(tensors)
        shape[axis] = sizes[axis]
        grids.append(expand(reshape(t, tuple(shape)), tuple(sizes)))
    return tuple(grids)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 vectors with a 1 at each label (F.one_hot); labels are checked to be in range.

    >>> import ndlite
    >>> ndlite.nn.functional.one_hot(ndlite.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    if not isinstance(tensor, Tensor) or tensor.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: needs an integer tensor of class labels, got "
                         f"{getattr(tensor, 'dtype', type(tensor).__name__)}")
    host = tensor.numpy()
    if num_classes == -1:
        num_classes = int(host.max()) + 1 if host.size else 0
    if host.size and (host.min() < 0 or host.max() >= num_classes):
        raise IndexError(f"one_hot: class labels must be in [0, {num_classes}), got values "
                         f"from {host.min()} to {host.max()} (shape {tensor.shape})")
    classes = make_tensor(np.arange(num_classes), backend=tensor._backend)
    return (reshape(tensor, tensor.shape + (1,)) == classes).to(int64)


# ---- scatter with PyTorch's signature ---------------------------------------------------------


def _scatter_operands(x: Tensor, dim: int, index: Tensor, src, op: str):
    axis = _dim(dim, x.ndim, op)
    if not isinstance(index, Tensor) or index.dtype.kind not in "iu":
        raise DTypeError(f"{op}: index must be an integer tensor")
    if index.ndim != x.ndim:
        raise ShapeError(f"{op}: index of shape {index.shape} must have as many dims as the "
                         f"input {x.shape}")
    if not isinstance(src, Tensor):
        src = x.new_full(index.shape, src)
    elif src.ndim != x.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
        raise ShapeError(f"{op}: index of shape {index.shape} does not fit src of shape "
                         f"{src.shape}")
    if any(i > n for d, (i, n) in enumerate(zip(index.shape, x.shape)) if d != axis):
        raise ShapeError(f"{op}: index of shape {index.shape} does not fit the input of shape "
                         f"{x.shape} outside dim {dim}")
    src = getitem(src, tuple(slice(0, n) for n in index.shape)).to(x.dtype)
    return axis, index, src


def _placed(values: Tensor, index: Tensor, axis: int, shape: tuple) -> Tensor:
    """values summed into zeros of `shape` at `index` along axis (the adjoint of gather)."""
    added = _scatter_adjoint(index, values, axis, shape[axis])
    widths = []
    for d in reversed(range(len(shape))):
        widths += [0, shape[d] - added.shape[d]]
    return pad(added, tuple(widths)) if any(widths) else added


def _scatter_adjoint(index, values, axis, size):
    return _scatter_add_adjoint(index, values, axis, size)


@autocast_op("scatter_add")
def scatter_add(input: Tensor, dim: int, index: Tensor, src) -> Tensor:
    """input plus src summed in at `index` along `dim` (Tensor.scatter_add): out[..., index[
    i, j], ...] += src[i, j]; deterministic, differentiable in input and src."""
    axis, index, src = _scatter_operands(input, dim, index, src, "scatter_add")
    return input + _placed(src, index, axis, input.shape)


def scatter(input: Tensor, dim: int, index: Tensor, src=None, value=None) -> Tensor:
    """input with src (or the number `value`) written at `index` along `dim`
    (Tensor.scatter); where an index repeats, PyTorch leaves the result undefined and ndlite
    gives the sum of the values written there."""
    source = value if src is None else src
    if source is None:
        raise TypeError("scatter: give src or value")
    axis, index, src = _scatter_operands(input, dim, index, source, "scatter")
    written = _placed(index.new_ones(index.shape).to(input.dtype), index, axis, input.shape)
    return where(written > 0, _placed(src, index, axis, input.shape), input)


def scatter_(input: Tensor, dim: int, index: Tensor, src=None, value=None, reduce=None):
    if reduce is not None:
        raise ValueError("scatter_: reduce= is not supported; use scatter_add_")
    return copy_(input, scatter(input, dim, index, src, value))


def scatter_add_(input: Tensor, dim: int, index: Tensor, src) -> Tensor:
    return copy_(input, scatter_add(input, dim, index, src))


def gather_along(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """torch.gather(input, dim, index)."""
    return gather(input, index, dim)


# ---- norms ------------------------------------------------------------------------------------


@autocast_op("vector_norm")  # outside widened: float32 in a region
@widened
def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The vector ord-norm over `dim` (all elements by default): 2 (Euclidean), 1, inf, -inf,
    0 (the count of non-zeros) or any other p: sum(|x|^p)^(1/p)."""
    if not is_floating(x.dtype):
        raise DTypeError(f"vector_norm: needs a float tensor, got {x.dtype}")
    if dtype is not None:
        x = x.to(dtype)
    a = x.abs()
    if ord == 2:
        return _root(sum(x * x, dim, keepdim), 2)
    if ord == 1:
        return sum(a, dim, keepdim)
    if ord == float("inf"):
        return amax(a, dim, keepdim)
    if ord == -float("inf"):
        return amin(a, dim, keepdim)
    if ord == 0:
        return sum((x != 0).to(x.dtype), dim, keepdim)
    return _root(sum(a ** ord, dim, keepdim), ord)


def _root(total: Tensor, p) -> Tensor:
    """total ** (1 / p), with PyTorch's subgradient 0 where total is 0 (the norm of a zero
    vector), where the chain rule through the root gives 0 * inf = NaN; NaN stays NaN. Outside
    autograd (clip_grad_norm_'s norm of every parameter) the plain root: the same values,
    without three more calls a norm."""
    if not (total.requires_grad and graph.mode.enabled):
        return total.sqrt() if p == 2 else total ** (1.0 / p)
    some = total != 0
    safe = where(some, total, 1.0)
    return where(some, safe.sqrt() if p == 2 else safe ** (1.0 / p), 0.0)


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """torch.norm: "fro" (and 2) is the Euclidean norm over `dim` (all elements by default)."""
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported (use 'fro' or a number)")
    return vector_norm(input, p, dim, keepdim, dtype)


def linalg_norm(input: Tensor, ord=None, dim=None, keepdim: bool = False, dtype=None):
    """torch.linalg.norm for vectors and the Frobenius norm of matrices."""
    if ord in (None, "fro"):
        return vector_norm(input, 2, dim, keepdim, dtype)
    if isinstance(ord, str) or (input.ndim == 2 and dim is None) or \
            (isinstance(dim, (tuple, list)) and len(dim) == 2):
        raise ValueError(f"linalg.norm: ord={ord!r} of a matrix is not supported")
    return vector_norm(input, ord, dim, keepdim, dtype)


def _at_least_2d(x: Tensor) -> Tensor:
    return x if x.ndim >= 2 else reshape(x, (1, -1))


def _norm_case(x, dim=None, keepdim=False):
    return vector_norm(x, 2, dim, keepdim)


T = TRANSCENDENTAL
declare("tril", Spec(UNARY, tol=EXACT, call=lambda x: tril(_at_least_2d(x), -1)), tril)
declare("triu", Spec(UNARY, tol=EXACT, call=lambda x: triu(_at_least_2d(x), 1)), triu)
declare("masked_fill", Spec(WHERE, tol=EXACT,
                            call=lambda cond, x, y: masked_fill(
                                x + y + cond.to(x.dtype) * 0, cond, -1.5)),
        masked_fill)
declare("repeat", Spec(UNARY, tol=EXACT, call=lambda x: repeat(x, (2,) + (1, 3)[:x.ndim]
                                                               + (1,) * max(x.ndim - 2, 0))),
        repeat)
declare("tile", Spec(UNARY, tol=EXACT, call=lambda x: tile(x, (2, 1))), tile)
declare("roll", Spec(UNARY, tol=EXACT, call=lambda x: roll(roll(x, 2), -1, 0)
                     if x.ndim else roll(x, 1)), roll)
declare("flip", Spec(UNARY, tol=EXACT, call=lambda x: flip(x, tuple(range(x.ndim)))), flip)
declare("outer", Spec(BINARY, call=lambda a, b: outer(reshape(a, (-1,)), reshape(b, (-1,)))),
        outer)
declare("vector_norm", Spec(REDUCE, tol=T, kinks="zero", call=_norm_case), vector_norm)
declare("scatter_add_pt", Spec(UNARY, call=lambda x: scatter_add(
    _at_least_2d(x), 0, _first_rows(_at_least_2d(x)), _at_least_2d(x) * 2)))


def _first_rows(x: Tensor) -> Tensor:
    """An index that sends every row of x to row 0 (repeated indices add up)."""
    return x.new_zeros(x.shape, dtype=int64)
