"""PyTorch 2.6's `torch.accelerator`: the accelerator this process would use, if any.

ndlite counts CUDA (the CuPy backend) as the accelerator, as PyTorch does; an OpenCL GPU is
not one here (select it by name: "opencl:gpu").

>>> import ndlite
>>> ndlite.accelerator.is_available() in (True, False)
True
"""

from __future__ import annotations

from . import cuda
from .device.registry import Device


def is_available() -> bool:
    """Whether a CUDA device can run ndlite (the CuPy backend starts)."""
    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> Device | None:
    """device(type='cuda') where CUDA works, else None."""
    return Device("cuda") if cuda.is_available() else None


def device_count() -> int:
    return cuda.device_count()


def current_device_index() -> int:
    return cuda.current_device()


def synchronize(device=None) -> None:
    cuda.synchronize(device)
