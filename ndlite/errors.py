"""The exceptions ndlite raises. Each names the op and the shapes involved.

They subclass the built-in exception a Python user would catch for the same mistake
(`ShapeError` is a `ValueError`, `DTypeError` a `TypeError`, ...), so generic handlers keep working.
Backends raise them too: this module imports nothing from the rest of ndlite.
"""

from __future__ import annotations


class ShapeError(ValueError):
    """Shapes that do not fit the op: broadcasting, matmul alignment, bad dims, bad sizes."""


class DTypeError(TypeError):
    """A dtype the op has no rule for (e.g. `-` on bool tensors, a float tensor as labels)."""


class DeviceMismatchError(RuntimeError):
    """Tensors that live on two different backends met in one op."""


class BackendUnavailableError(RuntimeError):
    """A backend was asked for but cannot run here.

    `reason` says why; `fix` says what to install or configure.
    """

    def __init__(self, name: str, reason: str, fix: str = ""):
        self.name, self.reason, self.fix = name, reason, fix
        message = f"backend {name!r} is unavailable: {reason}"
        if fix:
            message += f". Fix: {fix}"
        super().__init__(message)


class OutOfMemoryError(MemoryError):
    """The device ran out of memory even after its pool cache was freed and the op retried."""


class KernelBuildError(RuntimeError):
    """A device kernel failed to compile; `log` holds the compiler's build log."""

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(f"{message}\n--- build log ---\n{log}" if log else message)

