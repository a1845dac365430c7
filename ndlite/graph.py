"""The autograd engine: grad mode, graph nodes, recording, and the backward pass.

Define-by-run: every differentiable op whose inputs require grad (while grad mode is on)
leaves a `Node` on its output. A node knows its op, where each input's gradient goes
(`next`: the input's node, or the leaf tensor itself), and what backward needs (saved input
tensors, the output buffer, parameters, input shapes). `run_backward` walks the nodes in
reverse topological order and calls each op's `backward(node, grad)`, which is written in
Tensor ops: with `create_graph=True` those ops record nodes too, so gradients can be
differentiated again.

This module knows no Tensor class and no op: it handles tensors through the few fields every
tensor has (`_node`, `_rg`, `_data`, `_backend`, `_vbox`, `grad`, `_hooks`, `_grad_hooks`) and
makes new ones with the class of the tensors it is given (`type(t)._make`). The public API
over it (`backward`, `grad`, `value_and_grad`) is ndlite.autograd, above the Tensor class.
Gradient hooks (`Tensor.register_hook`) run where a gradient is whole: in `visit` for a
node's output, in `flush` for a leaf (grad_hooks.py).

Saved tensors carry a version check: an in-place change to a tensor between its use in forward
and the backward pass raises an error instead of giving a silently wrong gradient.

Grad mode is per thread, as in PyTorch: `no_grad()` in one thread leaves recording on in
the others.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Sequence

from .errors import ShapeError
from .grad_hooks import accumulate
from .grad_hooks import run as run_hooks
from .slice_grads import SLICING, slice_grad

# ---- grad mode (per thread) ---------------------------------------------------------------------


class _Mode(threading.local):
    """Grad mode of the current thread; every new thread starts with recording on."""

    enabled = True


mode = _Mode()


def is_grad_enabled() -> bool:
    return mode.enabled


class set_grad_enabled:
    """Context manager (and decorator) that turns gradient recording on or off in this thread.

    >>> import ndlite
    >>> x = ndlite.ones(2, requires_grad=True)
    >>> with ndlite.set_grad_enabled(False):
    ...     (x * 2).requires_grad
    False
    """

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)
        self.prev: list[bool] = []

    def __enter__(self):
        self.prev.append(mode.enabled)
        mode.enabled = self.mode
        return self

    def __exit__(self, *exc):
        mode.enabled = self.prev.pop()
        return False

    def __call__(self, fn: Callable) -> Callable:
        flag = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(flag):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(set_grad_enabled):
    """Ops inside record no graph: for inference and parameter updates.

    >>> import ndlite
    >>> x = ndlite.ones(2, requires_grad=True)
    >>> with ndlite.no_grad():
    ...     (x * 2).requires_grad
    False
    """

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Turn recording back on inside a `no_grad` block."""

    def __init__(self):
        super().__init__(True)


# ---- graph nodes ------------------------------------------------------------------------------

class Node:
    """One recorded op application: everything its backward needs, and where gradients go."""

    __slots__ = ("op", "next", "saved", "versions", "out_data", "out_version", "params", "shapes",
                 "backend", "wrap", "retained", "freed", "hooks", "__weakref__")

    def __init__(self, op, next, backend, shapes, params, wrap):
        self.op = op
        self.next = next
        self.backend = backend
        self.shapes = shapes
        self.params = params
        self.wrap = wrap  # the class of the op's output (its _make wraps a buffer)
        self.saved = ()
        self.versions = ()
        self.out_data = None
        self.out_version = None
        self.retained = None
        self.freed = False
        self.hooks = None  # the gradient hooks of the output (Tensor.register_hook)

    @property
    def name(self) -> str:
        return self.op.name

    def output(self):
        """The op's output as a tensor attached to this node (for backward of exp, tanh, ...)."""
        return self.wrap._make(self.out_data, self.backend, self, True)

    def __repr__(self) -> str:
        return f"<{self.op.__name__}Backward>"


def edge(t):
    """Where a gradient for tensor `t` goes: its node, the leaf itself, or nowhere."""
    node = t._node
    if node is not None:
        return node
    return t if t._rg else None


def version_of(t) -> tuple:
    box = t._vbox
    if box is None:
        box = t._vbox = [0]
    return (box, box[0])


def record(op, inputs: Sequence, out, params=None):
    """Attach a node for `op` to tensor `out`: called by ops when grad mode is on and an
    input requires grad. `inputs` are the op's operands (tensors, or Python scalars, which
    get no gradient). Returns `out`."""
    next, shapes = [], []
    tensor = out.__class__  # inputs of that class are tensors; anything else is a number
    for t in inputs:
        if t.__class__ is tensor:
            node = t._node
            next.append(node if node is not None else (t if t._rg else None))
            shapes.append(t._data.shape)
        else:
            next.append(None)
            shapes.append(())
    next = tuple(next)
    node = Node(op, next, out._backend, tuple(shapes), params, tensor)
    keep = op.save_inputs
    if keep is True and op.save_for is not None:  # only what the needed gradients read
        keep = op.save_for(tuple(n is not None for n in next))
    if keep:
        # the versions of what is kept (a number, or a tensor without a counter, is at 0);
        # plain numbers: the saved tensors themselves lead to their counters at backward time
        versions = [0 if t.__class__ is not tensor or t._vbox is None else t._vbox[0]
                    for t in inputs]
        if keep is True:
            node.saved, node.versions = tuple(inputs), tuple(versions)
        else:  # only the inputs backward reads: a change to another is no error
            node.saved = tuple(t if i in keep else None for i, t in enumerate(inputs))
            node.versions = tuple(v if i in keep else 0 for i, v in enumerate(versions))
    if op.save_output:
        node.out_data = out._data
        node.out_version = version_of(out)
    out._node = node
    out._rg = True
    return out


def attach(op, inputs: Sequence, out, params=None):
    """`out`, with a node for `op` if grad mode is on and a tensor among `inputs` requires
    grad: the last step of every op's apply path."""
    if mode.enabled and op.differentiable:
        tensor = out.__class__
        for t in inputs:
            if t.__class__ is tensor and t._rg:
                return record(op, inputs, out, params)
    return out


def _check_versions(node: Node) -> None:
    """Raise if a tensor backward reads was changed in place since the op recorded it."""
    wrap = node.wrap  # saved inputs of the output's class are tensors; others are numbers
    for t, version in zip(node.saved, node.versions):
        # a tensor without a counter was never modified: version 0
        box = t._vbox if t.__class__ is wrap else getattr(t, "_vbox", None)
        now = 0 if box is None else box[0]
        if now != version:
            _stale(node, now, version)
    if node.out_version is not None:
        box, version = node.out_version
        if box[0] != version:
            _stale(node, box[0], version)


def _stale(node: Node, now: int, version: int) -> None:
    raise RuntimeError(f"one of the tensors needed for the gradient of {node.op.name!r} has "
                       f"been modified by an in-place operation (it is at version {now}, "
                       f"expected version {version}); clone it before modifying it, or modify "
                       "a copy")


# ---- the backward pass ------------------------------------------------------------------------


def _toposort(roots: Sequence[Node]) -> list[Node]:
    """Nodes reachable from `roots`, each before every node its gradient flows into."""
    order, seen = [], set()  # nodes hash by identity
    for root in roots:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(root.next))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if child.__class__ is Node and child not in seen:
                    seen.add(child)
                    stack.append((child, iter(child.next)))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


class _Pass:
    """The gradients in flight during one backward pass.

    Without `capture`, leaf gradients accumulate into `.grad`; with it, the gradients of the
    tensors in `capture` are collected instead (None where no gradient reached them) and no
    `.grad` changes.
    """

    def __init__(self, grad_outputs, capture):
        self.grads: dict = {}
        self.capture = capture
        self.captured: dict = {}
        self.wanted = {} if capture is None else {
            id(edge(t)): i for i, t in enumerate(capture) if edge(t) is not None}
        # gradient tensors already held somewhere (the caller's, a node's, a leaf's): a leaf
        # may keep a gradient without copying it only if it is in none of these and no view.
        # By weak reference: an id alone outlives its tensor, and a fresh gradient that got a
        # dead one's id was copied for nothing (most of a ResNet-18's weight gradients)
        self.held: dict = {}
        for g in grad_outputs:
            self.hold(g)
        # target -> the gradient this pass made and holds alone: slice_grads.py adds into it
        self.mine: dict = {}
        self.pending: dict = {}  # leaf with gradient hooks -> the sum of its pieces so far

    def hold(self, g) -> None:
        self.held[id(g)] = weakref.ref(g)

    def add(self, target, g) -> None:
        prev = self.grads.get(target)
        self.grads[target] = g if prev is None else prev + g

    def deliver(self, target, g) -> None:
        """Pass gradient `g` on to a leaf (visit passes those for nodes itself); a leaf with
        gradient hooks gets the sum of its pieces once the nodes are done (`flush`)."""
        if target._grad_hooks and (self.capture is None or id(target) in self.wanted):
            prev = self.pending.get(target)
            self.pending[target] = g if prev is None else prev + g
        else:
            self.give(target, g)

    def give(self, target, g) -> None:
        if self.capture is not None:
            if id(target) in self.wanted:
                prev = self.captured.get(id(target))
                self.captured[id(target)] = g if prev is None else prev + g
        else:
            ref = self.held.get(id(g))  # held elsewhere already: not owned
            accumulate(target, g, mode.enabled,
                       owned=(ref is None or ref() is not g) and g._vbox is None)
            self.hold(g)

    def flush(self) -> None:
        """The pending leaves' gradients through their hooks, then on; what a hook saw or
        returned is held (copied before it becomes a `.grad`: the hook may keep it)."""
        for target, g in self.pending.items():
            self.hold(g)
            hooked = run_hooks(target._grad_hooks, g)
            self.hold(hooked)
            self.give(target, hooked)
        self.pending.clear()

    def visit(self, node: Node, grad, retain_graph: bool) -> None:
        """Run `node`'s backward with the gradient of its output, passing the results on."""
        if node.hooks:
            grad = run_hooks(node.hooks, grad)
        if self.capture is not None and id(node) in self.wanted:
            self.captured[id(node)] = grad
        if node.retained is not None:
            owner = node.retained()
            if owner is not None and self.capture is None:
                accumulate(owner, grad, mode.enabled, owned=False)
        if node.freed:
            raise RuntimeError(
                f"trying to backward through the graph a second time (through "
                f"{node.op.name!r}, whose saved tensors were freed after the first "
                f"backward); pass retain_graph=True to the first backward to keep them")
        _check_versions(node)
        self.mine.pop(node, None)
        if node.op in SLICING and not mode.enabled:  # first order: add into a held buffer
            return slice_grad(self, node, grad, node.next[0].__class__ is Node)
        in_grads = node.op.backward(node, grad)
        if in_grads.__class__ is not tuple:
            in_grads = (in_grads,)
        grads, held, mine = self.grads, self.held, self.mine
        for target, g, shape in zip(node.next, in_grads, node.shapes):
            if target is None or g is None:
                continue
            if g._data.shape != shape:
                raise ShapeError(
                    f"{node.op.name} backward produced a gradient of shape {g.shape} for "
                    f"an input of shape {shape} (a bug in the op's backward)")
            if target.__class__ is Node:  # deliver(target, g), inlined: the common case
                prev = grads.get(target)
                if prev is not None:
                    g = mine[target] = prev + g
                grads[target] = g
                held[id(g)] = weakref.ref(g)
            else:
                self.deliver(target, g)
        if not retain_graph and (node.saved or node.out_data is not None):
            node.saved = ()
            node.out_data = None
            node.freed = True


def run_backward(outputs, grad_outputs, retain_graph: bool, create_graph: bool,
                 capture: Sequence | None = None):
    """The engine behind `Tensor.backward` and `ndlite.autograd.grad`: gradients of `outputs`
    (each seeded with its entry of `grad_outputs`) into the leaves' `.grad`, or, with
    `capture`, returned for the tensors in `capture` (a list, None where none reached)."""
    flow = _Pass(grad_outputs, capture)
    roots = []
    for out, g in zip(outputs, grad_outputs):
        target = edge(out)
        if target is None:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn: "
                "call requires_grad_() on an input (or leave no_grad) before building the graph")
        flow.add(target, g)
        if type(target) is Node:
            roots.append(target)
    previous_mode = mode.enabled
    mode.enabled = create_graph
    try:
        for target in [t for t in flow.grads if type(t) is not Node]:
            flow.deliver(target, flow.grads.pop(target))  # leaves given as outputs
        for node in _toposort(roots):
            grad = flow.grads.pop(node, None)
            if grad is not None:
                flow.visit(node, grad, retain_graph)
        flow.flush()
    finally:
        mode.enabled = previous_mode
    if capture is None:
        return None
    return [flow.captured.get(id(edge(t))) if edge(t) is not None else None for t in capture]


def retain(tensor) -> None:
    """Keep the gradient of a non-leaf tensor in its `.grad` (Tensor.retain_grad)."""
    if tensor._node is not None:
        tensor._node.retained = weakref.ref(tensor)
