"""Joining and cutting along a dim: cat, stack, split, chunk, narrow, and constant pad.

Cutting gives views (basic slices); their gradients write the gradient back into zeros, and
cat's gradient cuts the gradient apart again.
"""

from __future__ import annotations

from ..dtypes import promote
from ..errors import ShapeError
from ..tensor import Tensor, _dim
from . import samples
from .dispatch import cast, nary, unary
from .movement import basic_slice, unsqueeze
from .registry import EXACT, Op, Spec, declare, implements, register

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
    spec = Spec(samples.CAT, tol=EXACT)

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


@implements(Cat)
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
    return basic_slice(x, key)


# ---- pad --------------------------------------------------------------------------------------


@register
class Pad(Op):
    name = "pad"
    spec = Spec(samples.PAD, tol=EXACT)

    @staticmethod
    def forward(b, x, widths, value):
        return b.pad(x, widths, value)

    @staticmethod
    def backward(node, grad):
        key = tuple(slice(lo, lo + n, 1) for (lo, _), n in zip(node.params["widths"],
                                                             node.shapes[0]))
        return basic_slice(grad, key)


@implements(Pad)
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
        out = basic_slice(out, tuple(
            slice(-min(lo, 0), m + min(hi, 0), 1)
            for (lo, hi), m in zip(widths, out.shape)))
    return out


declare("stack", Spec(samples.CAT, tol=EXACT, params={"same_shape": True}), stack)
declare("split", Spec(samples.SPLIT, tol=EXACT), split)
declare("chunk", Spec(samples.SPLIT, tol=EXACT, params={"chunks": True}), chunk)
