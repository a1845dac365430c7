"""The device layer: the Backend contract, the shared xp base and the backend registry.

Backends import from here and nowhere else in ndlite.
"""

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
    "Backend", "XpBackend", "BackendUnavailableError", "DeviceMismatchError", "DTypeError",
    "KernelBuildError", "OutOfMemoryError", "ShapeError", "current_backend", "get_backend",
    "known_backends", "probe", "register_backend", "set_backend", "synchronize", "using",
]
