"""More of PyTorch's functions, composed from registered ops (differentiable: `diff`,
`tensordot`, `cross`, `kron`, `cdist`, `Tensor.unfold`, `index_add`, `index_fill`) or computed
on the host where the size of the result depends on the values, as PyTorch's own do (`unique`,
`bincount`) or the result is an index (`searchsorted`, `bucketize`).
"""

from __future__ import annotations

import numpy as np

from ..creation import tensor
from ..dtypes import int32, int64, is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .composite import _dim, _tensor
from .elementwise import where
from .gather import index_select
from .join import cat, narrow
from .linalg import matmul
from .selection import scatter_add, vector_norm


def _host(t: Tensor) -> np.ndarray:
    return t.detach().numpy()


# ---- differentiable, composed ------------------------------------------------------------------


def movedim(input: Tensor, source, destination) -> Tensor:
    """The dims `source` moved to `destination`, the others in their order (torch.movedim;
    a view, through permute).

    >>> import ndlite
    >>> ndlite.zeros(2, 3, 4).movedim(0, -1).shape
    (3, 4, 2)
    """
    _tensor(input, "movedim")
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    n = input.ndim
    if len(src) != len(dst):
        raise ValueError(f"movedim: {len(src)} source dims for {len(dst)} destinations")
    src = [_dim(d, max(n, 1), "movedim") for d in src]
    dst = [_dim(d, max(n, 1), "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dims in {source} or {destination}")
    order = [None] * n
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return input.permute(*order) if n else input


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
    """The n-th forward difference along `dim`, after joining `prepend` and `append`
    (torch.diff).

    >>> import ndlite
    >>> ndlite.diff(ndlite.tensor([1.0, 4.0, 9.0, 16.0])).tolist()
    [3.0, 5.0, 7.0]
    """
    _tensor(input, "diff")
    if not input.ndim:
        raise ShapeError("diff: expected a tensor of at least 1 dim, got a 0-d tensor")
    d = _dim(dim, input.ndim, "diff")
    parts = [p for p in (prepend, input, append) if p is not None]
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        x = narrow(x, d, 1, length - 1) - narrow(x, d, 0, length - 1)
    return x


def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """The sum of products over the last `dims` dims of a and the first of b, or over the
    dims listed in `dims` = (dims of a, dims of b) (torch.tensordot)."""
    _tensor(a, "tensordot")
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: dims={dims} for shapes {a.shape} and {b.shape}")
        left, right = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        left, right = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                       [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
        left = [_dim(d, a.ndim, "tensordot") for d in left]
        right = [_dim(d, b.ndim, "tensordot") for d in right]
    if len(left) != len(right) or any(a.shape[i] != b.shape[j] for i, j in zip(left, right)):
        raise ShapeError(f"tensordot: contracted dims {left} of {a.shape} and {right} of "
                         f"{b.shape} do not match")
    keep_a = [i for i in range(a.ndim) if i not in left]
    keep_b = [j for j in range(b.ndim) if j not in right]
    k = int(np.prod([a.shape[i] for i in left]))
    lhs = a.permute(*keep_a, *left).reshape(-1, k)
    rhs = b.permute(*right, *keep_b).reshape(k, -1)
    return matmul(lhs, rhs).reshape(*[a.shape[i] for i in keep_a],
                                    *[b.shape[j] for j in keep_b])


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along `dim` (by default the first dim of size 3, as
    torch.cross; torch.linalg.cross takes -1)."""
    _tensor(input, "cross")
    shape = np.broadcast_shapes(input.shape, other.shape)
    if dim is None:
        sized = [i for i, n in enumerate(shape) if n == 3]
        if not sized:
            raise ShapeError(f"cross: no dim of size 3 in shapes {input.shape} and "
                             f"{other.shape}")
        dim = sized[0]
    d = _dim(dim, len(shape), "cross")
    if shape[d] != 3:
        raise ShapeError(f"cross: dim {dim} of shape {tuple(shape)} has size {shape[d]}, not 3")
    a, b = input.broadcast_to(shape), other.broadcast_to(shape)
    a0, a1, a2 = (narrow(a, d, i, 1) for i in range(3))
    b0, b1, b2 = (narrow(b, d, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product (torch.kron): shape the elementwise product of the shapes."""
    _tensor(input, "kron")
    n = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (n - input.ndim) + input.shape)
    b = other.reshape((1,) * (n - other.ndim) + other.shape)
    spread_a = a.reshape(sum(((s, 1) for s in a.shape), ()))
    spread_b = b.reshape(sum(((1, s) for s in b.shape), ()))
    return (spread_a * spread_b).reshape(*[p * q for p, q in zip(a.shape, b.shape)])


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode=None) -> Tensor:
    """The p-norm distance between each row of x1 (..., P, M) and each of x2 (..., R, M):
    (..., P, R) (torch.cdist; computed from the differences, so 0 where rows are equal, with
    the zero gradient PyTorch gives there)."""
    _tensor(x1, "cdist")
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: expected (..., P, M) and (..., R, M), got {x1.shape} and "
                         f"{x2.shape}")
    return vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, -1)


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Every window of `size` elements along `dimension`, `step` apart: that dim becomes the
    number of windows and a last dim of `size` is added (Tensor.unfold; a copy here, where
    PyTorch gives a view).

    >>> import ndlite
    >>> ndlite.arange(5.0).unfold(0, 2, 2).tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    _tensor(input, "unfold")
    if input.ndim == 0:
        input = input.reshape(1)
    d = _dim(dimension, input.ndim, "unfold")
    n = input.shape[d]
    if size < 0 or size > n or step <= 0:
        raise ShapeError(f"unfold: size {size} and step {step} for dim {dimension} of size {n} "
                         f"(shape {input.shape}): need 0 <= size <= {n} and step > 0")
    starts = np.arange(0, n - size + 1, step)
    index = (starts[:, None] + np.arange(size)[None, :]).reshape(-1)
    picked = index_select(input, d, tensor(index, backend=input.backend))
    shape = input.shape[:d] + (len(starts), size) + input.shape[d + 1:]
    return picked.reshape(shape).movedim(d + 1, -1)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """input with alpha * source[i] added at index[i] along `dim` (repeated indices add up;
    torch.index_add)."""
    _tensor(input, "index_add")
    d = _dim(dim, max(input.ndim, 1), "index_add")
    if index.ndim > 1 or source.ndim != input.ndim or (
            source.ndim and source.shape[d] != index.numel()):
        raise ShapeError(f"index_add: index of shape {index.shape} and source of shape "
                         f"{source.shape} for input of shape {input.shape} along dim {dim}")
    spread = index.reshape((1,) * d + (-1,) + (1,) * (source.ndim - d - 1)).to(int64)
    values = source if alpha == 1 else source * alpha
    return scatter_add(input, d, spread.expand(*source.shape), values)


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """input with the slices at `index` along `dim` set to `value` (torch.index_fill)."""
    _tensor(input, "index_fill")
    d = _dim(dim, max(input.ndim, 1), "index_fill")
    n = input.shape[d] if input.ndim else 1
    marked = np.zeros(n, dtype=bool)
    marked[_host(index).reshape(-1)] = True  # (an index out of range raises here)
    mask = tensor(marked.reshape((1,) * d + (n,) + (1,) * (input.ndim - d - 1)),
                  backend=input.backend)
    return where(mask, value, input)


# ---- on the host: results sized by the values, or indices ----------------------------------


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None):
    """The distinct values (sorted), with the inverse index and the counts when asked
    (torch.unique; no gradient, as PyTorch's).

    >>> import ndlite
    >>> ndlite.unique(ndlite.tensor([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    _tensor(input, "unique")
    values = _host(input)
    axis = None if dim is None else _dim(dim, input.ndim, "unique")
    out, inverse, counts = np.unique(values, return_inverse=True, return_counts=True, axis=axis)
    results = [tensor(out, backend=input.backend)]
    if return_inverse:
        shape = input.shape if axis is None else (input.shape[axis],)
        results.append(tensor(inverse.reshape(shape).astype(np.int64), backend=input.backend))
    if return_counts:
        results.append(tensor(counts.astype(np.int64), backend=input.backend))
    return results[0] if len(results) == 1 else tuple(results)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0, 1, ... occurs in a 1-D non-negative integer tensor (summing
    `weights` instead when given; torch.bincount; no gradient, as PyTorch's).

    >>> import ndlite
    >>> ndlite.bincount(ndlite.tensor([0, 2, 2])).tolist()
    [1, 0, 2]
    """
    _tensor(input, "bincount")
    if input.ndim != 1 or is_floating(input.dtype) or str(input.dtype) == "bool":
        raise DTypeError(f"bincount: expected a 1-D integer tensor, got {input.dtype} of shape "
                         f"{input.shape}")
    values = _host(input)
    if values.size and values.min() < 0:
        raise ValueError("bincount: the input must be non-negative")
    if weights is None:
        return tensor(np.bincount(values, minlength=minlength).astype(np.int64),
                      backend=input.backend)
    w = _host(weights)
    if w.shape != values.shape:
        raise ShapeError(f"bincount: weights of shape {weights.shape} for input of shape "
                         f"{input.shape}")
    out = np.bincount(values, weights=w, minlength=minlength)
    dtype = weights.dtype if is_floating(weights.dtype) else "float64"
    return tensor(out, backend=input.backend).to(dtype)


def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None, sorter=None) -> Tensor:
    """Where each value of `input` would go in the last dim of `sorted_sequence` to keep it
    sorted (the first such place, or the last with right=True / side="right"; rows of an
    N-D sequence for the matching rows of input; torch.searchsorted).

    >>> import ndlite
    >>> ndlite.searchsorted(ndlite.tensor([1.0, 3.0, 5.0]), ndlite.tensor([3.0, 6.0])).tolist()
    [1, 3]
    """
    _tensor(sorted_sequence, "searchsorted")
    where_ = sorted_sequence.backend
    which = side or ("right" if right else "left")
    if which not in ("left", "right") or (side is not None and right and side == "left"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    seq = _host(sorted_sequence)
    if sorter is not None:
        seq = np.take_along_axis(seq, _host(sorter), -1)
    scalar = not isinstance(input, Tensor)
    values = np.asarray(input) if scalar else _host(input)
    if seq.ndim == 1:
        out = np.searchsorted(seq, values, side=which)
    else:
        if values.shape[:-1] != seq.shape[:-1]:
            raise ShapeError(f"searchsorted: leading dims of {sorted_sequence.shape} and "
                             f"{values.shape} differ")
        rows_s, rows_v = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
        out = np.stack([np.searchsorted(s, v, side=which) for s, v in zip(rows_s, rows_v)])
        out = out.reshape(values.shape)
    result = tensor(np.asarray(out, dtype=np.int64), backend=where_)
    return result.to(int32) if out_int32 else result


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False,
              right: bool = False) -> Tensor:
    """The bucket of each value between the sorted 1-D `boundaries`: i with
    boundaries[i-1] < x <= boundaries[i] (boundaries[i-1] <= x < boundaries[i] with
    right=True; torch.bucketize)."""
    _tensor(boundaries, "bucketize")
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {boundaries.shape}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)

