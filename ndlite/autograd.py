"""Reverse-mode autodiff: graph nodes, the backward pass, grad modes and functional gradients.

Define-by-run: every differentiable op whose inputs require grad (while grad mode is on)
leaves a `Node` on its output. A node knows its op, where each input's gradient goes
(`next`: the input's node, or the leaf tensor itself), and what backward needs (saved input
tensors, the output buffer, parameters, input shapes). `backward` walks the nodes in reverse
topological order and calls each op's `backward(node, grad)`, which is written in Tensor ops:
with `create_graph=True` those ops record nodes too, so gradients can be differentiated again.

Saved tensors carry a version check: an in-place change to a tensor between its use in forward
and the backward pass raises an error instead of giving a silently wrong gradient.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence

from .errors import DTypeError, ShapeError

# ---- grad mode --------------------------------------------------------------------------------
# A plain module global (not thread-local): one read per op keeps the hot path short.

grad_enabled = True


def is_grad_enabled() -> bool:
    return grad_enabled


class set_grad_enabled:
    """Context manager (and decorator) that turns gradient recording on or off.

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
        global grad_enabled
        self.prev.append(grad_enabled)
        grad_enabled = self.mode
        return self

    def __exit__(self, *exc):
        global grad_enabled
        grad_enabled = self.prev.pop()
        return False

    def __call__(self, fn: Callable) -> Callable:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
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


Tensor = None  # set by ndlite.tensor once the class exists (avoids an import cycle)

# ---- graph nodes ------------------------------------------------------------------------------


class Node:
    """One recorded op application: everything its backward needs, and where gradients go."""

    __slots__ = ("op", "next", "saved", "versions", "out_data", "out_version", "params", "shapes",
                 "backend",
                 "retained", "freed", "__weakref__")

    def __init__(self, op, next, backend, shapes, params):
        self.op = op
        self.next = next
        self.backend = backend
        self.shapes = shapes
        self.params = params
        self.saved = ()
        self.versions = ()
        self.out_data = None
        self.out_version = None
        self.retained = None
        self.freed = False

    @property
    def name(self) -> str:
        return self.op.name

    def output(self):
        """The op's output as a tensor attached to this node (for backward of exp, tanh, ...)."""
        from .tensor import Tensor

        return Tensor._make(self.out_data, self.backend, self, True)

    def __repr__(self) -> str:
        return f"<{self.op.__name__}Backward>"


def edge(t):
    """Where a gradient for tensor `t` goes: its node, the leaf itself, or nowhere."""
    node = t._node
    if node is not None:
        return node
    return t if t.requires_grad else None


def version_of(t) -> tuple:
    box = t._vbox
    if box is None:
        box = t._vbox = [0]
    return (box, box[0])


def _version(t) -> int:
    """A saved input's version now (a tensor without a counter was never modified: 0)."""
    box = getattr(t, "_vbox", None)
    return 0 if box is None else box[0]


def record(op, inputs: Sequence, out, params=None):
    """Attach a node for `op` to tensor `out`: called by ops when grad mode is on and an
    input requires grad. `inputs` are the op's operands (Tensors, or Python scalars, which
    get no gradient). Returns `out`."""
    next, shapes, versions = [], [], []
    for t in inputs:
        if t.__class__ is Tensor:
            node = t._node
            next.append(node if node is not None else (t if t._rg else None))
            shapes.append(t._data.shape)
            box = t._vbox
            versions.append(0 if box is None else box[0])
        else:
            next.append(None)
            shapes.append(())
            versions.append(0)
    node = Node(op, tuple(next), out._backend, tuple(shapes), params)
    if op.save_inputs:
        node.saved = tuple(inputs)
        # plain numbers: the saved tensors themselves lead to their counters at backward time
        node.versions = tuple(versions)
    if op.save_output:
        node.out_data = out._data
        node.out_version = version_of(out)
    out._node = node
    out._rg = True
    return out


def _check_versions(node: Node) -> None:
    found = [(_version(t), v) for t, v in zip(node.saved, node.versions)]
    if node.out_version is not None:
        box, version = node.out_version
        found.append((box[0], version))
    for now, version in found:
        if now != version:
            raise RuntimeError(
                f"one of the tensors needed for the gradient of {node.op.name!r} has been "
                f"modified by an in-place operation (it is at version {now}, expected "
                f"version {version}); clone it before modifying it, or modify a copy"
            )


# ---- the backward pass ------------------------------------------------------------------------


def _toposort(roots: Sequence[Node]) -> list[Node]:
    """Nodes reachable from `roots`, each before every node its gradient flows into."""
    order, seen = [], set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.next))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if type(child) is Node and id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, iter(child.next)))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


def _accumulate(leaf, grad, owned: bool) -> None:
    """Add `grad` into `leaf.grad`. Outside create_graph, a first gradient that may share its
    buffer (backward passes hand the same buffer to several inputs: add, reshape, the
    caller's gradient) is copied, so an in-place change to one `.grad` shows nowhere else;
    an `owned` one (a fresh result that reached this leaf alone) is kept as it is."""
    if leaf.grad is not None:
        leaf.grad = leaf.grad + grad
    elif grad_enabled or owned:
        leaf.grad = grad
    else:
        leaf.grad = type(grad)._make(grad._backend.copy(grad._data), grad._backend)
    hooks = leaf._hooks
    if hooks:
        for hook in list(hooks.values()):
            hook(leaf)


class HookHandle:
    """What registering a hook returns: `remove()` unregisters it."""

    _next_id = 0

    def __init__(self, hooks: dict, hook):
        HookHandle._next_id += 1
        self.id = HookHandle._next_id
        self.hooks = hooks
        hooks[self.id] = hook

    def remove(self) -> None:
        self.hooks.pop(self.id, None)


def run_backward(outputs, grad_outputs, retain_graph: bool, create_graph: bool,
                 capture: Sequence | None = None):
    """The engine behind `Tensor.backward` and `ndlite.autograd.grad`.

    Without `capture`, leaf gradients accumulate into `.grad`; with it, the gradients of the
    tensors in `capture` are returned instead (None where no gradient reached them) and no
    `.grad` changes.
    """
    global grad_enabled
    grads: dict = {}
    roots = []
    for out, g in zip(outputs, grad_outputs):
        target = edge(out)
        if target is None:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn: "
                "call requires_grad_() on an input (or leave no_grad) before building the graph"
            )
        prev = grads.get(target)
        grads[target] = g if prev is None else prev + g
        if type(target) is Node:
            roots.append(target)

    captured: dict = {}
    if capture is not None:
        wanted = {id(edge(t)): i for i, t in enumerate(capture) if edge(t) is not None}
    # gradient tensors already held somewhere (the caller's, a node's, a leaf's): a leaf may
    # keep a gradient without copying it only if it is in none of these and is no view
    held = {id(g) for g in grad_outputs}

    def deliver(target, g):
        if type(target) is Node:
            prev = grads.get(target)
            grads[target] = g if prev is None else prev + g
            held.add(id(grads[target]))
        elif capture is not None:
            if id(target) in wanted:
                prev = captured.get(id(target))
                captured[id(target)] = g if prev is None else prev + g
        else:
            _accumulate(target, g, owned=id(g) not in held and g._vbox is None)
            held.add(id(g))

    previous_mode = grad_enabled
    grad_enabled = create_graph
    try:
        # leaves given directly as outputs (x.backward() on a leaf)
        for target in list(grads):
            if type(target) is not Node:
                deliver(target, grads.pop(target))
        for node in _toposort(roots):
            grad = grads.pop(node, None)
            if grad is None:
                continue
            if capture is not None and id(node) in wanted:
                captured[id(node)] = grad
            if node.retained is not None:
                owner = node.retained()
                if owner is not None and capture is None:
                    _accumulate(owner, grad, owned=False)
            if node.freed:
                raise RuntimeError(
                    f"trying to backward through the graph a second time (through "
                    f"{node.op.name!r}, whose saved tensors were freed after the first "
                    f"backward); pass retain_graph=True to the first backward to keep them"
                )
            _check_versions(node)
            in_grads = node.op.backward(node, grad)
            if type(in_grads) is not tuple:
                in_grads = (in_grads,)
            for target, g, shape in zip(node.next, in_grads, node.shapes):
                if target is None or g is None:
                    continue
                if g.shape != shape:
                    raise ShapeError(
                        f"{node.op.name} backward produced a gradient of shape {g.shape} for "
                        f"an input of shape {shape} (a bug in the op's backward)"
                    )
                deliver(target, g)
            if not retain_graph and (node.saved or node.out_data is not None):
                node.saved = ()
                node.out_data = None
                node.freed = True
    finally:
        grad_enabled = previous_mode
    if capture is not None:
        return [captured.get(id(edge(t))) if edge(t) is not None else None for t in capture]
    return None


def backward(tensor, gradient=None, retain_graph: bool | None = None, create_graph: bool = False):
    """Gradients of `tensor` with respect to every leaf that requires grad, into `.grad`."""
    from .tensor import Tensor

    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError(
                f"backward: grad can be implicitly created only for scalar outputs, but the "
                f"output has shape {tensor.shape}; pass gradient= with that shape"
            )
        gradient = Tensor._make(tensor._backend.full(tensor.shape, 1, tensor.dtype),
                                tensor._backend)
    else:
        gradient = _as_grad(gradient, tensor, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    run_backward([tensor], [gradient], retain_graph, create_graph)


def _as_grad(g, like, op):
    from .creation import tensor as make_tensor
    from .tensor import Tensor

    if not isinstance(g, Tensor):
        g = make_tensor(g, dtype=like.dtype, backend=like._backend)
    if g.shape != like.shape:
        raise ShapeError(f"{op}: gradient has shape {g.shape} but the output has shape "
                         f"{like.shape}")
    if g._backend is not like._backend:
        from .errors import DeviceMismatchError

        raise DeviceMismatchError(
            f"{op}: gradient is on {g._backend.name} but the output is on {like._backend.name}")
    return g


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False):
    """The gradients of `outputs` with respect to `inputs`, returned rather than accumulated
    (torch.autograd.grad). With `create_graph=True` the results can be differentiated again.

    >>> import ndlite
    >>> x = ndlite.tensor([1.0, 2.0], requires_grad=True)
    >>> (g,) = ndlite.autograd.grad((x ** 3).sum(), [x], create_graph=True)
    >>> ndlite.autograd.grad(g.sum(), [x])[0].tolist()   # d²/dx² x³ = 6x
    [6.0, 12.0]
    """
    from .tensor import Tensor

    single_out = isinstance(outputs, Tensor)
    outputs = [outputs] if single_out else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    gs = []
    for out, g in zip(outputs, grad_outputs):
        if g is None:
            if out.numel() != 1:
                raise RuntimeError(
                    "grad: grad_outputs must be given for a non-scalar output of shape "
                    f"{out.shape}")
            g = Tensor._make(out._backend.full(out.shape, 1, out.dtype), out._backend)
        gs.append(_as_grad(g, out, "grad"))
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("grad: one of the inputs does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    result = run_backward(outputs, gs, retain_graph, create_graph, capture=inputs)
    if not allow_unused and any(r is None for r in result):
        raise RuntimeError(
            "grad: one of the inputs was not used in the graph; pass allow_unused=True "
            "to get None for it")
    return tuple(result)


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """`fn`'s value and its gradient with respect to the arguments in `argnums` (JAX-style).

    `fn` must return a scalar tensor (or `(scalar, aux)` with `has_aux=True`). The arguments
    are used as fresh leaves, so their own `.grad` is never touched; an argument that does not
    affect the value gets a zero gradient.

    >>> import ndlite
    >>> value, g = ndlite.value_and_grad(lambda x: (x * x).sum())(ndlite.tensor([3.0]))
    >>> value.item(), g.tolist()
    (9.0, [6.0])
    """
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .tensor import Tensor

        args = list(args)
        for i in nums:
            if not isinstance(args[i], Tensor):
                raise TypeError(f"value_and_grad: argument {i} must be a Tensor, "
                                f"got {type(args[i]).__name__}")
            if not args[i].dtype.kind == "f":
                raise DTypeError(f"value_and_grad: argument {i} has dtype {args[i].dtype}; "
                                 "only floating tensors have gradients")
            args[i] = args[i].detach().requires_grad_()
        with enable_grad():
            out = fn(*args, **kwargs)
        value, aux = out if has_aux else (out, None)
        if not isinstance(value, Tensor) or value.numel() != 1:
            raise ShapeError("value_and_grad: fn must return a scalar tensor, got "
                             f"{getattr(value, 'shape', type(value).__name__)}")
        wrt = [args[i] for i in nums]
        if value.requires_grad:
            grads = run_backward([value], [Tensor._make(
                value._backend.full(value.shape, 1, value.dtype), value._backend)],
                False, False, capture=wrt)
        else:
            grads = [None] * len(wrt)
        grads = tuple(g if g is not None else t.detach() * 0 for g, t in zip(grads, wrt))
        grads = grads[0] if single else grads
        value = value.detach()
        return ((value, aux), grads) if has_aux else (value, grads)

    return wrapper


def grad_of(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """The gradient function of scalar-valued `fn` (exported as `ndlite.grad`, like jax.grad).

    >>> import ndlite
    >>> ndlite.grad(lambda x: (x ** 2).sum())(ndlite.tensor([1.0, -2.0])).tolist()
    [2.0, -4.0]
    """
    vg = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper


def retain(tensor) -> None:
    """Keep the gradient of a non-leaf tensor in its `.grad` (Tensor.retain_grad)."""
    if tensor._node is not None:
        tensor._node.retained = weakref.ref(tensor)
