"""PyTorch's grad-mode spellings on top of graph.py's switches: `@no_grad` used bare as a
decorator (as well as `@no_grad()` and `with no_grad():`), `inference_mode` (no recording,
like no_grad; ndlite has no separate inference tensors), and `is_inference_mode_enabled`.

>>> import ndlite
>>> @ndlite.no_grad
... def double(x):
...     return x * 2
>>> double(ndlite.ones(1, requires_grad=True)).requires_grad
False
"""

from __future__ import annotations

from . import graph


class no_grad(graph.no_grad):
    """Ops inside record no graph; also a decorator with or without parentheses."""

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if func is None:
            return self
        if not callable(func):
            raise TypeError(f"no_grad: expected a function to decorate, got "
                            f"{type(func).__name__}")
        graph.no_grad.__init__(self)
        return self(func)

    def __init__(self, func=None):
        super().__init__()


class inference_mode(graph.set_grad_enabled):
    """`with inference_mode():` / `@inference_mode()` / `@inference_mode`: no recording
    (mode=False records as usual)."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):
            graph.set_grad_enabled.__init__(self, False)
            return self(mode)
        return self

    def __init__(self, mode: bool = True):
        super().__init__(not mode)


def is_inference_mode_enabled() -> bool:
    return not graph.is_grad_enabled()
