"""Process-wide switches that backends read: whether float32 matmul (and convolution) may use
TF32 (`ndlite.backends.cuda.matmul.allow_tf32`, `ndlite.backends.cudnn.allow_tf32`, as in
PyTorch). Off by default. A backend that has TF32 registers a listener and applies the switch
when it changes; the others ignore it (no OpenCL device and no CPU has TF32)."""

from __future__ import annotations

from collections.abc import Callable

#: "matmul": float32 matmuls; "conv": convolutions (the CuPy backend's cuDNN path; ndlite's
#: own kernels never use TF32)
TF32 = {"matmul": False, "conv": False}
_listeners: list[Callable[[dict], None]] = []


def set_tf32(which: str, value: bool) -> None:
    """Switch TF32 for `which` ("matmul" or "conv") and tell every listening backend."""
    if which not in TF32:
        raise ValueError(f"set_tf32: unknown switch {which!r} (known: {', '.join(TF32)})")
    TF32[which] = bool(value)
    for listener in _listeners:
        listener(dict(TF32))


def on_tf32_change(listener: Callable[[dict], None]) -> None:
    """Call `listener(switches)` now and whenever a switch changes."""
    _listeners.append(listener)
    listener(dict(TF32))
