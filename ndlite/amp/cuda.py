"""`ndlite.cuda.amp`: PyTorch's older spellings `torch.cuda.amp.autocast(enabled=True,
dtype=float16, cache_enabled=True)` and `torch.cuda.amp.GradScaler(init_scale=2**16, ...)`,
the device fixed to "cuda"."""

from __future__ import annotations

from . import autocast_mode as _autocast
from . import grad_scaler as _grad_scaler


class autocast(_autocast.autocast):
    """`ndlite.amp.autocast("cuda", ...)`."""

    def __init__(self, enabled: bool = True, dtype="float16", cache_enabled: bool = True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_grad_scaler.GradScaler):
    """`ndlite.amp.GradScaler("cuda", ...)`."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
