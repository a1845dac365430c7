"""Automatic mixed precision, with PyTorch's names: `autocast` (ops in float16/bfloat16 or
float32 by the policy of ndlite.amp_state) and `GradScaler` (loss scaling for float16).

>>> import ndlite
>>> with ndlite.amp.autocast(device_type="cpu", dtype=ndlite.float16):
...     y = ndlite.ones(2, 3) @ ndlite.ones(3, 2)
>>> str(y.dtype)
'float16'
"""

from ..amp_state import FP32, LOW, POLICY, PROMOTE
from .autocast_mode import (
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
)
from .grad_scaler import GradScaler

__all__ = ["FP32", "LOW", "POLICY", "PROMOTE", "GradScaler", "autocast", "clear_autocast_cache",
           "get_autocast_dtype", "is_autocast_available", "is_autocast_cache_enabled",
           "is_autocast_enabled"]
