"""`autocast`: a region (context manager or decorator) where matrix products and convolutions
run in float16 or bfloat16 and range-sensitive ops in float32, as the policy of
ndlite.amp_state says, with PyTorch's signature `autocast(device_type, dtype=None,
enabled=True, cache_enabled=None)`.

>>> import ndlite
>>> x, w = ndlite.ones(2, 3), ndlite.ones(4, 3, requires_grad=True)
>>> with ndlite.autocast(dtype=ndlite.float16):
...     y = ndlite.nn.functional.linear(x, w)
...     p = ndlite.nn.functional.softmax(y, dim=1)
>>> str(y.dtype), str(p.dtype)
('float16', 'float32')
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections.abc import Callable

from ..amp_state import clear_cache, count_region, state
from ..device.registry import Device, current_backend
from ..dtypes import HALF, as_dtype

#: PyTorch's default low dtype per device type (a CPU's is bfloat16)
DEFAULT_DTYPE = {"cuda": "float16", "cpu": "bfloat16", "opencl": "float16"}


def _device_type(device_type) -> str:
    if device_type is None:
        return Device.of(current_backend()).type
    if not isinstance(device_type, str):
        raise ValueError(f"autocast: expected `device_type` of type `str`, got "
                         f"`{type(device_type).__name__}`")
    if device_type not in DEFAULT_DTYPE:
        raise RuntimeError(f"autocast: unsupported device_type {device_type!r}; ndlite has "
                           f"{sorted(DEFAULT_DTYPE)}")
    return device_type


class autocast:
    """Inside, each op runs in the dtype its autocast category asks for: matmul, linear and
    conv in `dtype` (default: float16 for "cuda" and "opencl", bfloat16 for "cpu"), exp, log,
    softmax, sums, norms and losses in float32, the rest in their inputs' dtype. Parameters
    stay float32; their low-precision casts are made once per region (`cache_enabled`) and
    gradients flow back through them to the float32 parameters. `device_type` defaults to the
    current backend's; the region applies to ops on every backend of this thread.

    Run the backward pass after the region, as in PyTorch: its ops then run in the dtypes the
    forward used.
    """

    def __init__(self, device_type: str | None = None, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        self.device = _device_type(device_type)
        self._enabled = bool(enabled)
        self.cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self.fast_dtype = None
        if self._enabled:
            self.fast_dtype = as_dtype(DEFAULT_DTYPE[self.device] if dtype is None else dtype)
            if self.fast_dtype not in HALF:
                warnings.warn(f"In {self.device} autocast, but the target dtype "
                              f"{self.fast_dtype} is not supported. Disabling autocast; "
                              f"autocast supports float16 and bfloat16.", stacklevel=2)
                self._enabled = False
        self._saved: list[tuple] = []

    def __enter__(self):
        self._saved.append((state.enabled, state.dtype, state.cache_enabled))
        state.nesting += 1
        if self._enabled:
            count_region(1)
        state.enabled = self._enabled
        if self._enabled:
            state.dtype = self.fast_dtype
            state.cache_enabled = self.cache_enabled
        return self

    def __exit__(self, *exc) -> bool:
        if self._enabled:
            count_region(-1)
        state.nesting -= 1
        if state.nesting == 0:
            clear_cache()
        state.enabled, state.dtype, state.cache_enabled = self._saved.pop()
        return False

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            region = copy.copy(self)  # its own saved state: calls may overlap in threads
            region._saved = []
            with region:
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast supports `device_type` ("cuda", "cpu", "opencl")."""
    return device_type in DEFAULT_DTYPE


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether this thread is inside an enabled autocast region."""
    return state.enabled


def get_autocast_dtype(device_type: str | None = None):
    """The low dtype of the current region, else `device_type`'s default."""
    if state.enabled:
        return state.dtype
    return as_dtype(DEFAULT_DTYPE[_device_type(device_type)])


def is_autocast_cache_enabled() -> bool:
    return state.cache_enabled


def clear_autocast_cache() -> None:
    """Forget the parameter casts of this thread's regions (each outermost region's end does)."""
    clear_cache()
