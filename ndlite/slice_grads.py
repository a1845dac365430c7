"""Gradients of basic slices, accumulated in place by a first-order backward pass.

The gradient of a basic slice `x[key]` is zeros of x's shape with the slice's gradient
written at `key` (SliceGrad). When several pieces of one tensor are differentiated
(`qkv[0], qkv[1], qkv[2]`, split, chunk, unbind, narrow, LSTM gates), materializing one such
buffer per piece and adding them full-size costs a zero fill, a write and a full-size add
per piece. Outside create_graph the backward pass (graph.py) instead keeps one buffer per
tensor that it made itself and that nothing else holds, and adds each later piece into its
slice in place: `held[key] += g`. The sums are the plain path's, in the same order; only the
sign of a zero may differ: a -0.0 the first (materialized) piece wrote where no later piece
goes stays -0.0, where the plain path adds the later pieces' +0.0 to it.

Knows no Tensor class and no op, like graph.py: it handles tensors through `_data`,
`_backend` and `type(t)._make`, and ops register here.
"""

from __future__ import annotations

#: ops whose backward is the output gradient written at `params["key"]` (a normalized basic
#: key, see `Backend.slice`) of zeros of the input's shape: ops/movement.py adds Slice
SLICING: set = set()


def into_slice(prev, owned: bool, grad, key: tuple, shape: tuple):
    """`prev` plus `grad` placed at `key` of zeros of `shape`, as a tensor nothing else holds.

    `prev` None: zeros with `grad` written in. `owned` (the pass made `prev`, nobody else
    holds it): `prev` itself, with `grad` added into its slice in place. Otherwise a copy of
    `prev` with the add in its slice (one copy instead of a zero fill, a write and a
    full-size add). A `prev` of another dtype, backend or shape takes the plain sum.
    """
    b, g = grad._backend, grad._data
    if prev is None:
        out = b.full(shape, 0, g.dtype)
        b.assign(b.slice(out, key), g)
        return type(grad)._make(out, b)
    data = prev._data
    if prev._backend is not b or data.dtype != g.dtype or data.shape != shape:
        return prev + into_slice(None, False, grad, key, shape)
    if not owned:
        data = b.copy(data)
        prev = type(prev)._make(data, b)
    view = b.slice(data, key)
    b.assign(view, b.add(view, g))
    return prev


def slice_grad(flow, node, grad, is_node: bool) -> None:
    """The first-order backward pass `flow` (graph._Pass) passing on the gradient of slice
    `node`: `grad` at its key of zeros of its input's shape, added into the gradient gathered
    for its input (a node's, when `is_node`, or a leaf's) in place where `flow.mine` says the
    pass made that and holds it alone. A leaf with hooks (gradient hooks, or post-accumulate
    ones outside a capture) takes the plain path: a fresh buffer through `flow.deliver`."""
    target = node.next[0]
    if target is None:
        return
    key, shape = node.params["key"], node.shapes[0]
    mine = flow.mine
    if is_node:
        prev = flow.grads.get(target)
        g = flow.grads[target] = mine[target] = into_slice(
            prev, prev is not None and mine.get(target) is prev, grad, key, shape)
        flow.hold(g)
    elif target._grad_hooks or (target._hooks and flow.capture is None):
        flow.deliver(target, into_slice(None, True, grad, key, shape))  # hooks: plain path
    elif flow.capture is not None:
        if id(target) in flow.wanted:
            prev = flow.captured.get(id(target))
            flow.captured[id(target)] = mine[target] = into_slice(
                prev, prev is not None and mine.get(target) is prev, grad, key, shape)
    else:  # as graph.accumulate: a first gradient kept, a later one summed into a new buffer
        prev = target.grad
        target.grad = mine[target] = into_slice(
            prev, prev is not None and mine.get(target) is prev, grad, key, shape)
