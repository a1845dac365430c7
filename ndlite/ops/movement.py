"""Movement ops: reshape/view, permute/transpose, expand, squeeze/unsqueeze, flatten, cat,
stack, split/chunk, narrow and pad.

None of them computes anything; their gradients move the gradient back (reshape it, permute
it back, sum it over expanded dims, slice it apart). Views (reshape, permute, expand, slices)
share the version counter of the tensor they view, so an in-place change through either is
seen by autograd's saved-tensor check.
"""

from __future__ import annotations

import numbers
import weakref
from math import prod

import numpy as np

from ..errors import ShapeError
from ..slice_grads import SLICING
from ..tensor import Tensor, _dim
from . import samples
from .calls import getitem_case, slice_grad_case
from .dispatch import unary, unbroadcast
from .registry import EXACT, Op, Spec, declare, implements, register


def share_version(out: Tensor, x: Tensor, step: tuple) -> Tensor:
    """Mark `out` as the view `step` of `x`: both count in-place changes together, and `out`
    records its base (x's base if x is a view) and the steps that make it from there, which
    an in-place write replays (ops/views.py, PyTorch's view tracking)."""
    box = x._vbox
    if box is None:
        box = x._vbox = [0]
    out._vbox = box
    if x._view is None:
        base, steps = x, (step,)
    else:
        base, steps = x._view[0], x._view[1] + (step,)
    out._view = (base, steps)
    views = base._views
    if views is None:
        base._views = [_ref(out)]
    else:
        views.append(_ref(out))
        n = len(views)
        if n >= 32 and not n & (n - 1):  # at each power of two, drop the dead: O(1) amortized
            views[:] = [r for r in views if r() is not None]
    return out


_ref = weakref.ref


def view_positions(shape: tuple, steps: tuple) -> np.ndarray:
    """The row-major positions in a base of `shape` of the elements of its view `steps`."""
    a = np.arange(prod(shape), dtype=np.int64).reshape(shape)
    for kind, arg in steps:
        if kind == "reshape":
            a = a.reshape(arg)
        elif kind == "permute":
            a = a.transpose(arg)
        elif kind == "expand":
            a = np.broadcast_to(a, arg)
        else:
            a = a[(*arg, Ellipsis)]
    return a


def replay(base: Tensor, steps: tuple) -> Tensor:
    """The view `steps` of `base`, recorded in the graph (not registered as a view)."""
    t = base
    for kind, arg in steps:
        op = _VIEW_OPS[kind]
        t = unary(op, t, **{"key" if op is Slice else "axes" if op is Permute else "shape": arg})
    return t


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
    spec = Spec(samples.RESHAPE, tol=EXACT)

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


@implements(Reshape)
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
    out = unary(Reshape, x, shape=shape)
    if shape != source and prod(source) and not x._backend.shares_memory(out._data, x._data):
        return out  # the backend had to copy: not a view
    return share_version(out, x, ("reshape", shape))


def view(x: Tensor, *shape) -> Tensor:
    """Like reshape, but always a view of x's memory: an error where that is impossible."""
    shape = _sizes(shape, "view")
    if shape != x.shape and (-1 in shape or prod(shape) != x.numel()):
        shape = _infer_shape(shape, x.numel(), x.shape, "view")
    out = reshape(x, shape)
    if out._view is None and shape != x.shape:
        raise RuntimeError(f"view: the size and strides of this tensor (shape {x.shape}, not "
                           f"contiguous) are not compatible with the shape {shape}; use "
                           ".reshape(...) instead")
    return out


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
    spec = Spec(samples.PERMUTE, tol=EXACT)

    @staticmethod
    def forward(b, x, axes):
        return b.permute(x, axes)

    @staticmethod
    def backward(node, grad):
        axes = node.params["axes"]
        return permute(grad, tuple(sorted(range(len(axes)), key=axes.__getitem__)))


@implements(Permute)
def permute(x: Tensor, *dims) -> Tensor:
    """Dims reordered: output dim i is input dim dims[i]."""
    dims = _sizes(dims, "permute")
    axes = tuple(_dim(d, x.ndim, "permute") for d in dims) if x.ndim else dims
    if sorted(axes) != list(range(x.ndim)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of the {x.ndim} dims of "
                         f"a tensor of shape {x.shape}")
    return share_version(unary(Permute, x, axes=axes), x, ("permute", axes))


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
    spec = Spec(samples.EXPAND, tol=EXACT)

    @staticmethod
    def forward(b, x, shape):
        return b.broadcast_to(x, shape)

    @staticmethod
    def backward(node, grad):
        return unbroadcast(grad, node.shapes[0])


@implements(Expand)
def expand(x: Tensor, *sizes) -> Tensor:
    """A broadcast view: size-1 dims repeated to `sizes` (-1 keeps a size); new dims lead."""
    sizes = _sizes(sizes, "expand")
    source = x._data.shape
    shape = _EXPANDED.get((source, sizes))
    if shape is None:
        shape = _expanded(x, sizes)
        if len(_EXPANDED) < 4096:
            _EXPANDED[(source, sizes)] = shape
    if shape == source:
        return share_version(unary(Reshape, x, shape=shape), x, ("reshape", shape))
    return share_version(unary(Expand, x, shape=shape), x, ("expand", shape))


#: expand's checked target shape per (shape, sizes): sizes are plain ints after _sizes
_EXPANDED: dict = {}


def _expanded(x: Tensor, sizes: tuple) -> tuple:
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
    return tuple(shape)


def broadcast_to(x: Tensor, shape) -> Tensor:
    """`x` broadcast to `shape` (NumPy rules)."""
    return expand(x, *_sizes((shape,), "broadcast_to"))


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, other.shape)


# ---- basic slicing (views through the backend's `slice`) -------------------------------------


@register
class Slice(Op):
    name = "slice"
    spec = Spec(samples.GETITEM, call=getitem_case, tol=EXACT,
                params={"advanced": False})

    @staticmethod
    def forward(b, x, key):
        return b.slice(x, key)

    @staticmethod
    def backward(node, grad):
        # a first-order pass does not call this: slice_grads.py adds `grad` into the slice
        # of a gradient buffer it holds for the input (SLICING below)
        return unary(SliceGrad, grad, key=node.params["key"], shape=node.shapes[0])


SLICING.add(Slice)


@register
class SliceGrad(Op):
    """The adjoint of a slice: zeros of the input's shape with the gradient written in."""

    name = "slice_grad"
    spec = Spec(samples.GETITEM, call=slice_grad_case, tol=EXACT,
                params={"advanced": False})

    @staticmethod
    def forward(b, grad, key, shape):
        out = b.full(shape, 0, grad.dtype)
        b.assign(b.slice(out, key), grad)
        return out

    @staticmethod
    def backward(node, grad):
        return basic_slice(grad, node.params["key"])


def basic_slice(x: Tensor, key: tuple) -> Tensor:
    """A view for a normalized basic key (see `Backend.slice`)."""
    return share_version(unary(Slice, x, key=key), x, ("slice", key))


_VIEW_OPS = {"reshape": Reshape, "permute": Permute, "expand": Expand, "slice": Slice}


declare("squeeze", Spec(samples.SQUEEZE, tol=EXACT), squeeze)
declare("unsqueeze", Spec(samples.UNSQUEEZE, tol=EXACT), unsqueeze)
declare("flatten", Spec(samples.FLATTEN, tol=EXACT), flatten)
declare("transpose", Spec(samples.TRANSPOSE, tol=EXACT), transpose)
