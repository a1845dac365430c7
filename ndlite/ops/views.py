"""Autograd through views: an in-place write rewrites the history of the view's base.

A view (reshape, permute, expand, basic slice) records its base and the steps that make it
from there (`Tensor._view`, set by movement.share_version); a base keeps its live views. When
an in-place op writes through a view in the graph, the base takes a new node, `CopySlices`:
the old base with the view's elements replaced by the written result (gradient: the old base
gets the gradient outside the view, the result the gradient inside it). Every live view of
the base, the written one included, then takes the node of its steps replayed on the new
base, so a view taken before the write differentiates through the write too. A write to the
base itself does the same for its views. This is PyTorch's CopySlices and view regeneration.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import graph
from ..tensor import Tensor
from .gather import take
from .movement import replay, reshape, view_positions
from .registry import Op


class CopySlices(Op):
    """base' = base with base.flat[positions] = value (value has the view's shape)."""

    name = "copy_slices"

    @staticmethod
    def backward(node, grad):
        p = node.params
        grad_base = grad_value = None
        if node.next[0] is not None:
            grad_base = grad * Tensor._make(p["keep"], grad._backend)
        if node.next[1] is not None:
            index = Tensor._make(p["positions"], grad._backend)
            grad_value = reshape(take(reshape(grad, (-1,)), index, 0), node.shapes[1])
        return grad_base, grad_value


def check_view_write(x: Tensor, op: str) -> None:
    """A view of a leaf that requires grad cannot be written in grad mode (PyTorch's rule):
    the leaf's gradient would have to describe two values."""
    if x._view is not None and graph.mode.enabled:
        base = x._view[0]
        if base._rg and base._node is None:
            raise RuntimeError(
                f"{op}: a view of a leaf tensor that requires grad (base shape {base.shape}) is "
                "being used in an in-place operation; do it under ndlite.no_grad(), or on a "
                "clone of the leaf")
        if base._rg and not x._rg:  # the write could not be recorded in the base's history
            raise RuntimeError(
                f"{op}: this view (shape {x.shape}) was made in no_grad mode from a tensor that "
                "requires grad, and is being modified in place with grad mode on; make the "
                "view with grad mode on, or write under ndlite.no_grad()")


def _copy_slices(base: Tensor, steps: tuple, value: Tensor) -> None:
    """Give `base` the CopySlices node of writing `value` through the view `steps`."""
    positions = view_positions(base.shape, steps).reshape(-1)
    if "expand" in (kind for kind, _ in steps) and np.unique(positions).size < positions.size:
        raise RuntimeError(
            f"in-place write to an expanded view (shape {value.shape}) of a tensor of shape "
            f"{base.shape}: more than one element of the view refers to one memory location; "
            "clone it first")
    b = base._backend
    index = b.from_numpy(positions)
    keep = b.full(base.shape, 1, base.dtype)  # 0 where the view is: made on the device
    b.put(keep, index, b.full((positions.size,), 0, base.dtype))
    params = {"positions": index, "keep": keep}
    old = Tensor._make(base._data, b, base._node, base._rg)
    new = graph.record(CopySlices, (old, value), Tensor._make(base._data, b), params)
    _take_node(base, new._node)


def _take_node(t: Tensor, node) -> None:
    """`t` now stands for `node`'s output; a retained gradient moves with it (retain_grad
    asks for the gradient of the tensor's current value, as in PyTorch)."""
    old = t._node
    if old is not None and old.retained is not None and old.retained() is t:
        old.retained = None
        node.retained = weakref.ref(t)
    t._node, t._rg = node, True


def after_write(x: Tensor, out: Tensor) -> None:
    """`out` (recorded in the graph) was just written into x's memory: x, its base and all
    their live views take their new history."""
    if x._view is None:
        base = x
        _take_node(x, out._node)
    else:
        base = x._view[0]
        _copy_slices(base, x._view[1], out)
    views = base._views
    if views:
        with graph.enable_grad():
            for v in [r() for r in views]:
                if v is not None:
                    _take_node(v, replay(base, v._view[1])._node)
