"""`GradScaler`: loss scaling for float16 training, with PyTorch's defaults and API.

float16 gradients below 2^-24 flush to zero; multiplying the loss by a large scale before
backward keeps them representable, and `unscale_` divides the (float32) parameter gradients
by it again before the optimizer step. A step whose gradients hold an inf or a NaN is skipped
and the scale halves; after `growth_interval` clean steps in a row it doubles.

    scaler = ndlite.amp.GradScaler()
    for x, y in loader:
        optimizer.zero_grad()
        with ndlite.autocast(dtype=ndlite.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)   # unscale_ (if not done), then step unless inf/NaN
        scaler.update()

The inf/NaN check costs one host synchronization per step: the non-finite counts of all
gradients are added on the device and read once. The scale lives on the host (a float
rounded to float32, as PyTorch's float32 scale tensor), so `scale` and `update` need none.
bfloat16 has float32's range: it needs no scaler.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..dtypes import HALF, float16
from ..graph import no_grad
from ..tensor import Tensor

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def _f32(value: float) -> float:
    return float(np.float32(value))


class GradScaler:
    """Scales the loss, unscales the gradients, skips steps with inf/NaN gradients and adapts
    the scale (`init_scale` 2^16, x`backoff_factor` 0.5 on inf/NaN, x`growth_factor` 2 after
    `growth_interval` 2000 clean steps). With `enabled=False` every method is a pass-through."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
            if not 0.0 < backoff_factor < 1.0:
                raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got "
                                 f"{backoff_factor}")
            if int(growth_interval) <= 0:
                raise ValueError(f"GradScaler: growth_interval must be a positive integer, "
                                 f"got {growth_interval}")
        self._init_scale = float(init_scale)
        self._scale: float | None = None  # set by the first scale()
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict] = {}

    # ---- the training step ---------------------------------------------------------------

    def scale(self, outputs):
        """`outputs` (a tensor, or a list/tuple of them, nested) times the scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = _f32(self._init_scale)
        if isinstance(outputs, Tensor):
            if outputs.dtype in HALF:  # PyTorch's float32 scale tensor promotes a half loss
                outputs = outputs.float()
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, Iterable):
            return [self.scale(o) for o in outputs]
        raise ValueError("GradScaler.scale: outputs must be a tensor or an iterable of tensors")

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer),
                                              {"stage": _READY, "found_inf": None})

    def unscale_(self, optimizer) -> None:
        """Divide the gradients of `optimizer`'s parameters by the scale, in place, and count
        their inf/NaN values on the device (read by `step`)."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._state(optimizer)
        if state["stage"] is _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if p.grad is not None]
        inv = _f32(1.0 / self._scale)
        bad = None
        with no_grad():
            for g in grads:
                if g.dtype == float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                g.mul_(inv)
                count = (~g.isfinite()).sum()
                bad = count if bad is None else bad + count
        state["found_inf"] = bad if bad is not None else 0
        state["stage"] = _UNSCALED

    def _found_inf(self, state: dict) -> bool:
        """Whether the unscaled gradients held an inf or a NaN: the step's one host read."""
        found = state["found_inf"]
        if isinstance(found, Tensor):
            found = state["found_inf"] = int(found.item())
        return bool(found)

    def step(self, optimizer, *args, **kwargs):
        """`optimizer.step(*args, **kwargs)` on the unscaled gradients, unless they hold an
        inf or a NaN (then the step is skipped and None returned)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale("step")
        state = self._state(optimizer)
        if state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _READY:
            self.unscale_(optimizer)
        result = None
        if not self._found_inf(state):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Halve the scale (times backoff_factor) if any step since the last update saw an
        inf/NaN, else count a clean step and double it (times growth_factor) after
        growth_interval of them; or set it to `new_scale` (a float or a 1-element tensor)."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise ValueError("GradScaler.update: new_scale should be a 1-element "
                                     "tensor")
                new_scale = new_scale.item()
            self._scale = _f32(new_scale)
        else:
            states = [s for s in self._per_optimizer.values() if s["stage"] is not _READY]
            if not states:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(self._found_inf(s) for s in states):
                self._scale = _f32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = _f32(self._scale * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer.clear()

    def _check_scale(self, what: str) -> None:
        if self._scale is None:
            raise AssertionError(f"GradScaler.{what}: attempted {what} but the scale is not "
                                 f"set yet; call scale(loss) first (on this instance)")

    # ---- inspection and state ------------------------------------------------------------

    def get_scale(self) -> float:
        """The scale (init_scale before the first scale(); 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return _f32(self._init_scale) if self._scale is None else self._scale

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker (an
        empty dict when disabled), as PyTorch's."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = _f32(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
