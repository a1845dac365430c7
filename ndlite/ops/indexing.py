"""Indexing: `x[key]` and `x[key] = value` with NumPy's rules, and `fill_` / `copy_`; as in
PyTorch, integers in a key with index arrays select first (`x[0, :, [1, 2]]` is (3, 2) for a
(2, 3, 4) tensor, where NumPy gives (2, 3)).

Basic keys (ints, slices, None, ...) give views through the backend's `slice` primitive.
Advanced keys (integer arrays, lists, boolean masks, integer tensors) are resolved on the host:
indices are checked against the shape *before* anything reaches the device (a GPU would
otherwise read out of bounds), boolean masks become integer positions, and the selection
becomes one `take` along a dim (or along the flattened advanced dims). Everything is
differentiable: the adjoint of `take`/`gather` is `scatter_add`, and of a slice, writing the
gradient into zeros.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import graph
from ..creation import tensor
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from . import samples
from .calls import getitem_case, index_put_case
from .dispatch import as_scalar, broadcast_shapes, check_same_backend, unbroadcast
from .gather import index_select, take
from .inplace import check_inplace, commit
from .movement import basic_slice, reshape
from .registry import EXACT, Op, Spec, declare, implements, register


def _normalize_slice(s: slice, n: int) -> slice:
    start, stop, step = s.indices(n)
    if not len(range(start, stop, step)):
        return slice(0, 0, 1)  # empty (indices() may say start=-1, which means "last")
    if step < 0 and stop < 0:
        stop = None  # a negative step that runs past index 0
    return slice(start, stop, step)


def _normalize_int(i: int, n: int, dim: int, shape) -> int:
    if not -n <= i < n:
        raise IndexError(f"getitem: index {i} is out of bounds for dim {dim} with size {n} "
                         f"(shape {shape})")
    return i % n


# ---- parsing a key ----------------------------------------------------------------------------


def _classify(item):
    """("int" | "slice" | "none" | "ellipsis" | "array" | "mask", value)"""
    if item.__class__ is int:
        return "int", item
    if item is None:
        return "none", None
    if item is Ellipsis:
        return "ellipsis", None
    if isinstance(item, slice):
        for v in (item.start, item.stop, item.step):
            if v is not None and not isinstance(v, numbers.Integral):
                raise TypeError(f"getitem: slice bounds must be integers, got {item}")
        if item.step == 0:
            raise ValueError("getitem: slice step cannot be zero")
        return "slice", item
    if isinstance(item, bool):
        raise TypeError("getitem: a Python bool is not a valid index; use a bool tensor mask")
    if isinstance(item, numbers.Integral):
        return "int", int(item)
    if isinstance(item, Tensor):
        array = item._backend.to_numpy(item._data)
    else:
        array = np.asarray(item)
    if array.dtype == np.bool_:
        return "mask", array
    if array.dtype.kind in "iu" or (array.size == 0 and is_floating(array.dtype)):
        if array.ndim == 0 and not isinstance(item, (Tensor, np.ndarray)):
            return "int", int(array)
        return "array", array.astype(np.int64)
    raise DTypeError(f"getitem: indices must be integers, slices, None, ..., or integer/bool "
                     f"arrays, got {array.dtype}")


def parse_key(key, shape: tuple):
    """Split `key` into one entry per consumed dim: (kind, value) with kinds int, slice, none,
    array (advanced int64 array). Masks become integer arrays; the Ellipsis is expanded."""
    if not isinstance(key, tuple):
        key = (key,)
    items = [_classify(k) for k in key]
    consumed = sum(1 if kind in ("int", "slice", "array") else
                   (v.ndim if kind == "mask" else 0) for kind, v in items)
    if consumed > len(shape):
        raise IndexError(f"getitem: too many indices for a tensor of shape {shape}: "
                         f"{consumed} were given")
    ellipses = [i for i, (kind, _) in enumerate(items) if kind == "ellipsis"]
    if len(ellipses) > 1:
        raise IndexError("getitem: an index can only have a single ellipsis ('...')")
    fill = [("slice", slice(None))] * (len(shape) - consumed)
    if ellipses:
        # an Ellipsis that fills no dims still separates advanced indices (NumPy's rule)
        items = items[:ellipses[0]] + (fill or [("sep", None)]) + items[ellipses[0] + 1:]
    else:
        items = items + fill
    out, dim = [], 0
    for kind, v in items:
        if kind == "sep":
            out.append((kind, v))
        elif kind == "mask":
            if v.shape != shape[dim:dim + v.ndim]:
                raise IndexError(f"getitem: mask of shape {v.shape} does not match the indexed "
                                 f"dims {shape[dim:dim + v.ndim]} of shape {shape}")
            out.extend(("array", a) for a in np.nonzero(v))
            dim += v.ndim
        else:
            out.append((kind, v))
            dim += kind != "none"
    return out


def _basic_key(parsed, shape) -> tuple:
    key, dim = [], 0
    for kind, v in parsed:
        if kind == "sep":
            continue
        if kind == "none":
            key.append(None)
            continue
        n = shape[dim]
        key.append(_normalize_int(v, n, dim, shape) if kind == "int" else _normalize_slice(v, n))
        dim += 1
    return tuple(key)


def _view_key(parsed, shape, op: str):
    """The basic key of the view that advanced indexing works on, and its advanced dims.

    Integers select first, as in PyTorch (`x[0, :, [1, 2]]` on a (2, 3, 4) tensor is (3, 2)),
    so they drop their dim from the view; arrays keep theirs as full slices, None adds one.
    Returns (key, advanced dims of the view, broadcast non-negative indices, whether the
    advanced entries stand next to each other once the integers are gone).
    """
    key, arrays, adv, dim = [], [], [], 0
    rest = [kind for kind, _ in parsed if kind != "int"]
    places = [i for i, kind in enumerate(rest) if kind == "array"]
    adjacent = places == list(range(places[0], places[0] + len(places)))
    for kind, v in parsed:
        if kind == "sep":
            continue
        if kind == "none":
            key.append(None)
            continue
        n = shape[dim]
        if kind == "slice":
            key.append(_normalize_slice(v, n))
        elif kind == "int":
            key.append(_normalize_int(v, n, dim, shape))
        else:
            a = np.asarray(v, dtype=np.int64)
            if a.size and (a.min() < -n or a.max() >= n):
                bad = a[(a < -n) | (a >= n)].flat[0]
                raise IndexError(f"{op}: index {bad} is out of bounds for dim {dim} with size "
                                 f"{n} (shape {shape})")
            key.append(slice(0, n, 1))
            arrays.append(np.where(a < 0, a + n, a))
            adv.append(sum(not isinstance(k, int) for k in key) - 1)
        dim += 1
    try:
        arrays = np.broadcast_arrays(*arrays)
    except ValueError:
        raise IndexError(f"{op}: shape mismatch: index arrays of shapes "
                         f"{[a.shape for a in arrays]} cannot be broadcast together") from None
    return tuple(key), adv, arrays, adjacent


def _advanced_positions(view_shape: tuple, adv: list, arrays: list, adjacent: bool):
    """Linear (row-major) positions in the view of every selected element, laid out in the
    result's shape. NumPy's rule: adjacent advanced dims stay in place, else they go first."""
    strides = [1] * len(view_shape)
    for d in range(len(view_shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * view_shape[d + 1]
    batch = arrays[0].shape
    others = [d for d in range(len(view_shape)) if d not in adv]
    before = [d for d in others if adjacent and d < adv[0]]
    after = [d for d in others if d not in before]
    shape = tuple(view_shape[d] for d in before) + batch + tuple(view_shape[d] for d in after)
    nd = len(shape)

    def place(values, at):
        return values.reshape((1,) * at + values.shape + (1,) * (nd - at - values.ndim))

    pos = np.zeros(shape, dtype=np.int64)
    for a, d in zip(arrays, adv):
        pos += place(a * strides[d], len(before))
    for j, d in enumerate(before):
        pos += place(np.arange(view_shape[d]) * strides[d], j)
    for j, d in enumerate(after):
        pos += place(np.arange(view_shape[d]) * strides[d], len(before) + len(batch) + j)
    return pos


def _device_index(x: Tensor, host: np.ndarray) -> Tensor:
    return Tensor._make(x._backend.from_numpy(np.ascontiguousarray(host, dtype=np.int64)),
                        x._backend)


def getitem(x: Tensor, key) -> Tensor:
    """`x[key]` with NumPy semantics: basic keys give views; integer arrays, lists, bool masks
    and integer tensors select copies. Differentiable either way.

    >>> import ndlite
    >>> x = ndlite.arange(12).reshape(3, 4)
    >>> x[1].tolist(), x[:, [0, 3]].tolist(), x[x > 9].tolist()
    ([4, 5, 6, 7], [[0, 3], [4, 7], [8, 11]], [10, 11])
    """
    cls = key.__class__
    if (cls is int or cls is slice) and x._data.shape:  # the most common keys, fast
        n = x._data.shape[0]
        return basic_slice(x, (_normalize_int(key, n, 0, x.shape) if cls is int else
                               _normalize_slice(key, n),))
    parsed = parse_key(key, x.shape)
    if not any(kind == "array" for kind, _ in parsed):
        return basic_slice(x, _basic_key(parsed, x.shape))
    k, adv, arrays, adjacent = _view_key(parsed, x.shape, "getitem")
    y = basic_slice(x, k)
    if len(adv) == 1:  # one index array: a single take along its dim
        p, batch = adv[0], arrays[0].shape
        out = take(y, _device_index(y, arrays[0].reshape(-1)), p)
        return reshape(out, y.shape[:p] + batch + y.shape[p + 1:])
    pos = _advanced_positions(y.shape, adv, arrays, adjacent)
    out = take(reshape(y, (-1,)), _device_index(y, pos.reshape(-1)), 0)
    return reshape(out, pos.shape)


# ---- writing: x[key] = value ------------------------------------------------------------------


def _write(b, view, value, positions, shape, dtype) -> None:
    """Write `value` (a buffer or a number) into `view` at `positions` (None: all of it)."""
    if positions is None:
        b.assign(view, value)
        return
    n = positions.shape[0]
    if hasattr(value, "shape"):
        flat = b.reshape(b.broadcast_to(value, shape), (n,))
    else:
        flat = b.full((n,), value, dtype)
    b.put(view, positions, flat)


@register
class IndexPut(Op):
    """out = a copy of x with out[key] = value: the functional form of `x[key] = value`."""

    name = "index_put"
    spec = Spec(samples.INDEX_PUT, call=index_put_case, tol=EXACT)

    @staticmethod
    def forward(b, x, value, key, positions, shape):
        out = b.copy(x)
        _write(b, b.slice(out, key), value, positions, shape, x.dtype)
        return out

    @staticmethod
    def backward(node, grad):
        p = node.params
        gx = gv = None
        if node.next[0] is not None:  # the overwritten elements get no gradient
            gx = index_put(grad, 0.0, p)
        if node.next[1] is not None:
            gv = unbroadcast(_select(grad, p), node.shapes[1])
        return gx, gv


def _select(grad: Tensor, p: dict) -> Tensor:
    """grad[key] for the key an IndexPut wrote through."""
    view = basic_slice(grad, p["key"])
    if p["positions"] is None:
        return view
    out = take(reshape(view, (-1,)), Tensor._make(p["positions"], grad._backend), 0)
    return reshape(out, p["shape"])


@implements(IndexPut)
def index_put(x: Tensor, value, plan: dict) -> Tensor:
    """A copy of `x` with `value` written where `plan` (from `write_plan`) says."""
    data = value._data if isinstance(value, Tensor) else value
    out = Tensor._make(IndexPut.forward(x._backend, x._data, data, plan["key"],
                                        plan["positions"], plan["shape"]), x._backend)
    if graph.mode.enabled and (x._rg or (isinstance(value, Tensor) and value._rg)):
        graph.record(IndexPut, (x, value), out, plan)
    return out


def write_plan(x: Tensor, key) -> dict:
    """Where `x[key] = ...` writes: the basic key of a view, the linear positions in that view
    (a device buffer, None for a basic key), and the shape the value must broadcast to."""
    parsed = parse_key(key, x.shape)
    if not any(kind == "array" for kind, _ in parsed):
        k = _basic_key(parsed, x.shape)
        return {"key": k, "positions": None, "shape": x._backend.slice(x._data, k).shape}
    k, adv, arrays, adjacent = _view_key(parsed, x.shape, "setitem")
    pos = _advanced_positions(x._backend.slice(x._data, k).shape, adv, arrays, adjacent)
    return {"key": k, "positions": x._backend.from_numpy(np.ascontiguousarray(pos.reshape(-1))),
            "shape": pos.shape}


def setitem(x: Tensor, key, value) -> None:
    """`x[key] = value`: in place, through views too; differentiable for non-leaf tensors.

    >>> import ndlite
    >>> x = ndlite.zeros(2, 3)
    >>> x[0, [0, 2]] = 5.0
    >>> x.tolist()
    [[5.0, 0.0, 5.0], [0.0, 0.0, 0.0]]
    """
    check_inplace(x, "setitem")
    plan = write_plan(x, key)
    if not isinstance(value, Tensor) and as_scalar(value, "setitem") is None:
        value = tensor(value, dtype=x.dtype, backend=x._backend)
    if isinstance(value, Tensor):
        check_same_backend("setitem", x, value)
        if broadcast_shapes(value.shape, plan["shape"], "setitem") != plan["shape"]:
            raise ShapeError(f"setitem: value of shape {value.shape} cannot be broadcast to the "
                             f"indexed shape {plan['shape']}")
        value = value.to(x.dtype)
    else:
        value = as_scalar(value, "setitem")
    if graph.mode.enabled and (x._rg or (isinstance(value, Tensor) and value._rg)):
        old = Tensor._make(x._data, x._backend, x._node, x._rg)
        commit(x, index_put(old, value, plan))
        return
    data = value._data if isinstance(value, Tensor) else value
    b = x._backend
    _write(b, b.slice(x._data, plan["key"]), data, plan["positions"], plan["shape"], x.dtype)
    x._bump()


declare("getitem", Spec(samples.GETITEM, call=getitem_case, tol=EXACT,
                        params={"advanced": True}), getitem)
declare("take", Spec(samples.TAKE, tol=EXACT, call=index_select))


def fill_(x: Tensor, value) -> Tensor:
    """Every element set to `value` (a number or a one-element tensor)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError(f"fill_: value must have one element, got shape {value.shape}")
        value = value.reshape(())
    setitem(x, Ellipsis, value)
    return x


def copy_(x: Tensor, src) -> Tensor:
    """x's values replaced by `src` (broadcast, cast, and moved from another backend)."""
    if isinstance(src, Tensor) and src._backend is not x._backend:
        src = src.to(x._backend)
    setitem(x, Ellipsis, src)
    return x
