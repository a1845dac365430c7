"""The device layer: the Backend contract, the shared xp base and the backend registry.

Backends import from here and nowhere else in ndlite. The package is also callable, as
`torch.device` is: `ndlite.device("cuda:1")` is `Device("cuda:1")`.
"""

import sys
import types

from ..errors import (
    BackendUnavailableError,
    DeviceMismatchError,
    DTypeError,
    KernelBuildError,
    OutOfMemoryError,
    ShapeError,
)
from .protocol import Backend
from .registry import (
    Device,
    current_backend,
    get_backend,
    known_backends,
    probe,
    register_backend,
    set_backend,
    synchronize,
    using,
)
from .xp import XpBackend

__all__ = [
    "Backend", "Device", "XpBackend", "BackendUnavailableError", "DeviceMismatchError",
    "DTypeError",
    "KernelBuildError", "OutOfMemoryError", "ShapeError", "current_backend", "get_backend",
    "known_backends", "probe", "register_backend", "set_backend", "synchronize", "using",
]


class _CallableModule(types.ModuleType):
    """`ndlite.device(...)` makes a Device while `ndlite.device.Backend` stays a module
    attribute."""

    def __call__(self, type, index=None) -> Device:  # noqa: A002 - torch.device's names
        return Device(type, index)

    def __instancecheck__(self, obj) -> bool:  # isinstance(d, ndlite.device), as torch's
        return isinstance(obj, Device)


sys.modules[__name__].__class__ = _CallableModule
