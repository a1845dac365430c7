"""Hook handles, the gradient hooks of tensors (`Tensor.register_hook`) and accumulation into
a leaf's `.grad` (which runs its post-accumulate hooks): what graph.py's backward pass calls.

A gradient hook is called as `hook(grad)` when backward has the whole gradient of its tensor
(every contribution summed) and may return a new one, which then flows on in its place. On
a non-leaf tensor the hooks live on the node that made it (registered after an in-place op,
they see the gradient of the new value; before it, of the old one, as in PyTorch); on a leaf
they run before the gradient is accumulated into `.grad` or captured by `autograd.grad`.
"""

from __future__ import annotations


class HookHandle:
    """What registering a hook returns: `remove()` unregisters it (so does leaving a `with`
    block that holds it, as torch.utils.hooks.RemovableHandle)."""

    _next_id = 0

    def __init__(self, hooks: dict, hook):
        HookHandle._next_id += 1
        self.id = HookHandle._next_id
        self.hooks = hooks
        hooks[self.id] = hook

    def remove(self) -> None:
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self.remove()
        return False


def run(hooks: dict, grad):
    """`grad` through each of `hooks` in turn; a hook returns None (the gradient as it was) or
    a gradient of the same shape, dtype and backend."""
    for hook in list(hooks.values()):
        result = hook(grad)
        if result is None:
            continue
        if (result.__class__ is not grad.__class__ or result._data.shape != grad._data.shape
                or result._data.dtype != grad._data.dtype
                or result._backend is not grad._backend):
            what = (f"a {type(result).__name__}" if result.__class__ is not grad.__class__ else
                    f"shape {result.shape}, {result.dtype} on {result._backend.name}")
            raise RuntimeError(
                f"register_hook: a hook returned {what} for a gradient of shape {grad.shape}, "
                f"{grad.dtype} on {grad._backend.name}: it must return None or a tensor of "
                "the same shape, dtype and backend")
        grad = result
    return grad


def accumulate(leaf, grad, create_graph: bool, owned: bool) -> None:
    """Add `grad` into `leaf.grad`, then run the leaf's post-accumulate-grad hooks. Outside
    create_graph, a first gradient that may share its buffer (backward passes hand the same
    buffer to several inputs: add, reshape, the caller's gradient) is copied, so an in-place
    change to one `.grad` shows nowhere else; an `owned` one (a fresh result that reached this
    leaf alone) is kept as it is."""
    if leaf.grad is not None:
        leaf.grad = leaf.grad + grad
    elif create_graph or owned:
        leaf.grad = grad
    else:
        leaf.grad = type(grad)._make(grad._backend.copy(grad._data), grad._backend)
    hooks = leaf._hooks
    if hooks:
        for hook in list(hooks.values()):
            hook(leaf)
