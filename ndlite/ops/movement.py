"""Movement ops: reshape/view, permute/transpose, expand, squeeze/unsqueeze, flatten, cat,
stack, split/chunk, narrow and pad.

None of them computes anything; their gradients move the gradient back (reshape it, permute
it back, sum it over expanded dims, slice it apart). Views (reshape, permute, expand, slices)
share the version counter of the tensor they view, so an in-place change through either is
seen by autograd's saved-tensor check.
"""

from __future__ import annotations

import numbers
from math import prod

from ..dtypes import promote
from ..errors import ShapeError
from ..tensor import Tensor, _dim
from .dispatch import cast, nary, unary, unbroadcast
from .registry import EXACT, Op, Spec, declare, register


def share_version(out: Tensor, base: Tensor) -> Tensor:
    """Mark `out` as a view of `base`: both count in-place changes together."""
    box = base._vbox
    if box is None:
        box = base._vbox = [0]
    out._vbox = box
    return out


def _sizes(args, op: str) -> tuple:
    """`f(2, 3)`, `f((2, 3))` and `f([2, 3])` all mean (2, 3)."""
    if len(args) == 1 and args[0].__class__ in (tuple, list):
        args = tuple(args[0])
    for n in args:
        if n.__class__ is not int:  # the slow path: NumPy integers, or an error
            if not isinstance(n, numbers.Integral) or isinstance(n, bool):
                raise TypeError(f"{op}: sizes must be integers, got {args!r}")
            return tuple(int(n) for n in args)
    return args


# ---- reshape ----------------------------------------------------------------------------------


@register
class Reshape(Op):
    name = "reshape"
    spec = Spec("reshape", tol=EXACT)

    @staticmethod
    def forward(b, x, shape):
        return b.reshape(x, shape)

    @staticmethod
    def backward(node, grad):
        return reshape(grad, node.shapes[0])


def _infer_shape(shape: tuple, numel: int, source: tuple, op: str) -> tuple:
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
    if any(n < -1 for n in shape):
        raise ShapeError(f"{op}: invalid size in shape {shape}")
    known = 1
    for n in shape:
        if n != -1:
            known *= n
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: cannot reshape a tensor of shape {source} ({numel} elements) "
                             f"into {shape}")
        shape = tuple(numel // known if n == -1 else n for n in shape)
    elif known != numel:
        raise ShapeError(f"{op}: cannot reshape a tensor of shape {source} ({numel} elements) "
                         f"into {shape} ({known} elements)")
    return shape


def reshape(x: Tensor, *shape) -> Tensor:
    """The same values in a new shape; one size may be -1 (inferred). A view when possible.

    >>> import ndlite
    >>> ndlite.arange(6).reshape(2, -1).shape
    (2, 3)
    """
    shape = _sizes(shape, "reshape")
    source = x._data.shape
    if shape != source and (-1 in shape or prod(shape) != prod(source) or
                            (shape and min(shape) < 0)):
        shape = _infer_shape(shape, prod(source), source, "reshape")
    return share_version(unary(Reshape, x, shape=shape), x)


view = reshape


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Dims start_dim..end_dim merged into one."""
    if x.ndim == 0:
        return reshape(x, (1,))
    s, e = _dim(start_dim, x.ndim, "flatten"), _dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                         f"(shape {x.shape})")
    n = 1
    for d in x.shape[s:e + 1]:
        n *= d
    return reshape(x, x.shape[:s] + (n,) + x.shape[e + 1:])


def unflatten(x: Tensor, dim: int, sizes) -> Tensor:
    """Dim `dim` split into `sizes`."""
    d = _dim(dim, x.ndim, "unflatten")
    sizes = _infer_shape(tuple(sizes), x.shape[d], (x.shape[d],), "unflatten")
    return reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])


def squeeze(x: Tensor, dim=None) -> Tensor:
    """Size-1 dims removed (all of them, or those in `dim` that have size 1)."""
    if dim is None:
        dims = {i for i, n in enumerate(x.shape) if n == 1}
    else:
        dims = {_dim(d, x.ndim, "squeeze") for d in ((dim,) if isinstance(dim, int) else dim)}
        dims = {d for d in dims if x.ndim and x.shape[d] == 1}
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in dims))


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """A size-1 dim inserted at `dim` (-1 appends)."""
    d = _dim(dim, x.ndim + 1, "unsqueeze")
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


# ---- permute ----------------------------------------------------------------------------------


@register
class Permute(Op):
    name = "permute"
    spec = Spec("permute", tol=EXACT)

    @staticmethod
    def forward(b, x, axes):
        return b.permute(x, axes)

    @staticmethod
    def backward(node, grad):
        axes = node.params["axes"]
        return permute(grad, tuple(sorted(range(len(axes)), key=axes.__getitem__)))


def permute(x: Tensor, *dims) -> Tensor:
    """Dims reordered: output dim i is input dim dims[i]."""
    dims = _sizes(dims, "permute")
    axes = tuple(_dim(d, x.ndim, "permute") for d in dims) if x.ndim else dims
    if sorted(axes) != list(range(x.ndim)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of the {x.ndim} dims of "
                         f"a tensor of shape {x.shape}")
    return share_version(unary(Permute, x, axes=axes), x)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Two dims swapped."""
    axes = list(range(x.ndim))
    a, b = _dim(dim0, x.ndim, "transpose"), _dim(dim1, x.ndim, "transpose")
    axes[a], axes[b] = axes[b], axes[a]
    return permute(x, axes)


def t(x: Tensor) -> Tensor:
    """The transpose of a matrix (dims reversed)."""
    return permute(x, tuple(reversed(range(x.ndim))))


def matrix_transpose(x: Tensor) -> Tensor:
    """The last two dims swapped (torch's .mT)."""
    if x.ndim < 2:
        raise ShapeError(f"mT: needs at least 2 dims, got shape {x.shape}")
    return transpose(x, -2, -1)


# ---- expand -----------------------------------------------------------------------------------


@register
class Expand(Op):
    name = "expand"
    spec = Spec("expand", call="ndlite:Tensor.expand", tol=EXACT)

    @staticmethod
    def forward(b, x, shape):
        return b.broadcast_to(x, shape)

    @staticmethod
    def backward(node, grad):
        return unbroadcast(grad, node.shapes[0])


def expand(x: Tensor, *sizes) -> Tensor:
    """A broadcast view: size-1 dims repeated to `sizes` (-1 keeps a size); new dims lead."""
    sizes = _sizes(sizes, "expand")
    if len(sizes) < x.ndim:
        raise ShapeError(f"expand: the number of sizes ({len(sizes)}) must be at least the "
                         f"number of dims ({x.ndim}) of shape {x.shape}")
    lead = len(sizes) - x.ndim
    shape = []
    for i, n in enumerate(sizes):
        have = x.shape[i - lead] if i >= lead else None
        if n == -1:
            if have is None:
                raise ShapeError(f"expand: -1 is not allowed for the new leading dim {i} "
                                 f"(shape {x.shape} to {sizes})")
            n = have
        if have is not None and have != n and have != 1:
            raise ShapeError(f"expand: the size {have} at dim {i - lead} cannot be expanded to "
                             f"{n} (shape {x.shape} to {sizes})")
        if n < 0:
            raise ShapeError(f"expand: invalid size {n} in {sizes}")
        shape.append(n)
    shape = tuple(shape)
    if shape == x.shape:
        return share_version(unary(Reshape, x, shape=shape), x)
    return share_version(unary(Expand, x, shape=shape), x)


def broadcast_to(x: Tensor, shape) -> Tensor:
    """`x` broadcast to `shape` (NumPy rules)."""
    return expand(x, *_sizes((shape,), "broadcast_to"))


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, other.shape)


# ---- concatenate and split -------------------------------------------------------------------


def _promote_all(tensors, op: str):
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty sequence of tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(t).__name__}")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = promote(dtype, t.dtype)
    return [cast(t, dtype) for t in tensors]


@register
class Cat(Op):
    name = "cat"
    spec = Spec("cat", tol=EXACT)

    @staticmethod
    def forward(b, *xs, axis):
        return b.concatenate(xs, axis)

    @staticmethod
    def backward(node, grad):
        axis = node.params["axis"]
        grads, start = [], 0
        for shape, target in zip(node.shapes, node.next):
            n = shape[axis]
            grads.append(narrow(grad, axis, start, n) if target is not None else None)
            start += n
        return tuple(grads)


def cat(tensors, dim: int = 0) -> Tensor:
    """Tensors joined along an existing dim; all other sizes must match.

    >>> import ndlite
    >>> ndlite.cat([ndlite.zeros(2, 3), ndlite.ones(1, 3)]).shape
    (3, 3)
    """
    tensors = _promote_all(list(tensors), "cat")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated; use stack")
    axis = _dim(dim, first.ndim, "cat")
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if i != axis):
            raise ShapeError(f"cat: shapes {first.shape} and {t.shape} differ outside dim {dim}")
    return nary(Cat, tensors, axis=axis)


concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Tensors of one shape joined along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise ShapeError(f"stack: all tensors must have one shape, got {shape} and {t.shape}")
    d = _dim(dim, len(shape) + 1, "stack")
    return cat([unsqueeze(t, d) for t in tensors], d)


def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of consecutive pieces along `dim`: of one size (the last may be smaller), or of
    the sizes in a list."""
    axis = _dim(dim, x.ndim, "split")
    n = x.shape[axis]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0:
            raise ShapeError(f"split: split size must be positive, got {size}")
        sizes = [min(size, n - s) for s in range(0, n, size)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ShapeError(f"split: sizes {sizes} do not add up to {n}, the size of dim {dim} "
                             f"of shape {x.shape}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, axis, start, s))
        start += s
    return tuple(out)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    """At most `chunks` views of (nearly) equal size along `dim`."""
    if chunks <= 0:
        raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
    n = x.shape[_dim(dim, x.ndim, "chunk")]
    return split(x, max(-(-n // chunks), 1), dim)


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """The view x[..., start:start+length, ...] along `dim`."""
    axis = _dim(dim, x.ndim, "narrow")
    n = x.shape[axis]
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length and start + length <= n):
        raise ShapeError(f"narrow: start {start} and length {length} are out of range for dim "
                         f"{dim} of size {n}")
    key = tuple(slice(start, start + length, 1) if i == axis else slice(0, m, 1)
                for i, m in enumerate(x.shape))
    return indexing.basic_slice(x, key)


# ---- pad --------------------------------------------------------------------------------------


@register
class Pad(Op):
    name = "pad"
    spec = Spec("pad", tol=EXACT)

    @staticmethod
    def forward(b, x, widths, value):
        return b.pad(x, widths, value)

    @staticmethod
    def backward(node, grad):
        key = tuple(slice(lo, lo + n, 1) for (lo, _), n in zip(node.params["widths"],
                                                             node.shapes[0]))
        return indexing.basic_slice(grad, key)


def pad(x: Tensor, pad, mode: str = "constant", value=0.0) -> Tensor:
    """Constant padding, PyTorch order: `pad` = (left, right) for the last dim, then
    (top, bottom) for the one before, ... Negative widths crop.

    >>> import ndlite
    >>> ndlite.pad(ndlite.ones(2, 2), (1, 1)).shape
    (2, 4)
    """
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not supported; ndlite pads with a constant")
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ShapeError(f"pad: padding {pad} must have an even length of at most 2 * {x.ndim} "
                         f"for shape {x.shape}")
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    crop = any(lo < 0 or hi < 0 for lo, hi in widths)
    for (lo, hi), n in zip(widths, x.shape):
        if n + lo + hi < 0:
            raise ShapeError(f"pad: padding {pad} makes a negative size for shape {x.shape}")
    out = unary(Pad, x, widths=tuple((max(lo, 0), max(hi, 0)) for lo, hi in widths),
                value=value)
    if crop:
        out = indexing.basic_slice(out, tuple(
            slice(-min(lo, 0), m + min(hi, 0), 1)
            for (lo, hi), m in zip(widths, out.shape)))
    return out


declare("squeeze", Spec("squeeze", tol=EXACT))
declare("unsqueeze", Spec("unsqueeze", tol=EXACT))
declare("flatten", Spec("flatten", tol=EXACT))
declare("transpose", Spec("transpose", tol=EXACT))
declare("stack", Spec("cat", tol=EXACT, params={"same_shape": True}))
declare("split", Spec("split", tol=EXACT))
declare("chunk", Spec("split", tol=EXACT, params={"chunks": True}))


from . import indexing  # noqa: E402  (indexing builds on this module)
