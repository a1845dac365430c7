"""Module forward hooks, PyTorch's API (`register_forward_pre_hook`, `register_forward_hook`):
what `Module.__call__` runs around `forward` when a module has any.

A pre-hook is called as `hook(module, args)` (with `with_kwargs=True`:
`hook(module, args, kwargs)`) before forward and may return new arguments: a tuple (a single
value is taken as a one-tuple), or `(args, kwargs)` with `with_kwargs`. A forward hook is
called as `hook(module, args, output)` (`hook(module, args, kwargs, output)`) after it and may
return a new output. Hooks run in the order they were registered (`prepend=True` puts one
first). One registered with `always_call=True` also runs when forward, or a hook before it,
raises: with the output so far (None if forward raised), its own error only a warning, so
that the first error is the one raised. Each registration returns a handle whose `remove()`
takes the hook off (also as a context manager). A module without hooks pays one attribute
test a call. Backward hooks: backward_hooks.py.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

from ..grad_hooks import HookHandle
from . import backward_hooks


def add(module, table: str, hook, flags: tuple, prepend: bool) -> HookHandle:
    """Register `hook` with its `flags` (with_kwargs, always_call) in the module's `table`."""
    if not callable(hook):
        raise TypeError(f"{type(module).__name__}: a hook must be callable, got "
                        f"{type(hook).__name__}")
    hooks = module.__dict__.get(table)
    if hooks is None:
        hooks = OrderedDict()
        object.__setattr__(module, table, hooks)
    handle = HookHandle(hooks, (hook, *flags))
    object.__setattr__(module, "_hooked", True)  # Module.__call__ takes call() from now on
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def call(module, args: tuple, kwargs: dict):
    """`module.forward(*args, **kwargs)` with the module's pre-hooks before it and its forward
    hooks after it."""
    forward_hooks = list((module._forward_hooks or {}).values())
    backward = module._backward_hooks or module._backward_pre_hooks
    output, ran, state = None, 0, None
    try:
        for hook, with_kwargs, _ in list((module._forward_pre_hooks or {}).values()):
            args, kwargs = _pre_hook(module, hook, with_kwargs, args, kwargs)
        if backward:
            args, state = backward_hooks.wrap_input(module, args)
        output = module.forward(*args, **kwargs)
        for hook, with_kwargs, _ in forward_hooks:
            ran += 1
            result = hook(module, args, kwargs, output) if with_kwargs else \
                hook(module, args, output)
            if result is not None:
                output = result
        return backward_hooks.wrap_output(module, output, state) if backward else output
    except Exception:
        # the always_call hooks not reached yet, as PyTorch: their errors only warn
        for hook, with_kwargs, always in forward_hooks[ran:]:
            if always:
                try:
                    result = hook(module, args, kwargs, output) if with_kwargs else \
                        hook(module, args, output)
                    output = output if result is None else result
                except Exception as exc:  # noqa: BLE001 - forward's error is the one to raise
                    warnings.warn("module forward hook with always_call=True raised an "
                                  f"exception that was silenced as another error was raised "
                                  f"in forward: {exc}", stacklevel=3)
        raise


def _pre_hook(module, hook, with_kwargs: bool, args: tuple, kwargs: dict) -> tuple:
    """(args, kwargs) after one forward pre-hook."""
    if with_kwargs:
        result = hook(module, args, kwargs)
        if result is None:
            return args, kwargs
        if not (isinstance(result, tuple) and len(result) == 2):
            raise RuntimeError("forward pre-hook must return None or a tuple of "
                               f"(new_args, new_kwargs), but got {result!r}")
        return result
    result = hook(module, args)
    if result is None:
        return args, kwargs
    return (result if isinstance(result, tuple) else (result,)), kwargs
