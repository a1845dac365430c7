"""More learning-rate schedules with PyTorch's names and formulas: ConstantLR, PolynomialLR,
MultiplicativeLR, CosineAnnealingWarmRestarts (SGDR) and CyclicLR. `ndlite.optim.lr_scheduler`
holds them with the others."""

from __future__ import annotations

import math

from ..optimizer import Optimizer
from .closed_form import LRScheduler, OneCycleLR, per_group


class ConstantLR(LRScheduler):
    """lr = base_lr * factor for the first total_iters epochs, then base_lr."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return base_lr * (self.factor if epoch < self.total_iters else 1.0)


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power.

    >>> import ndlite
    >>> opt = ndlite.optim.SGD([ndlite.nn.Parameter(ndlite.zeros(1))], lr=1.0)
    >>> sched = ndlite.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=2.0)
    >>> [round(sched.lr_at(1.0, e), 4) for e in range(6)]
    [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        if total_iters <= 0:
            raise ValueError(f"PolynomialLR: total_iters must be positive, got {total_iters}")
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return base_lr * (1.0 - min(epoch, self.total_iters) / self.total_iters) ** self.power


class MultiplicativeLR(LRScheduler):
    """Each step multiplies the learning rate by lr_lambda(epoch) (one function, or one per
    parameter group); epoch 0 keeps base_lr."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1):
        self.lr_lambdas = per_group(lr_lambda, optimizer, "MultiplicativeLR", "lambdas")
        super().__init__(optimizer, last_epoch)

    def step(self, epoch: int | None = None) -> None:
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.last_epoch > 0:
            for group, fn in zip(self.optimizer.param_groups, self.lr_lambdas, strict=True):
                group["lr"] = group["lr"] * fn(self.last_epoch)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from base_lr to eta_min over T_i epochs, then a restart, T_i growing
    by T_mult each time (SGDR); `step(epoch)` takes a fractional epoch too.

    >>> import ndlite
    >>> opt = ndlite.optim.SGD([ndlite.nn.Parameter(ndlite.zeros(1))], lr=1.0)
    >>> sched = ndlite.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(round(sched.get_last_lr()[0], 3)); sched.step()
    >>> lrs
    [1.0, 0.5, 1.0, 0.5]
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1,  # noqa: N803
                 eta_min: float = 0.0, last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive int, got "
                             f"{T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, got "
                             f"{T_mult}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def step(self, epoch: float | None = None) -> None:
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        elif epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = self.eta_min + (base - self.eta_min) * (
                1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class CyclicLR(LRScheduler):
    """The learning rate cycles between base_lr and max_lr (step_size_up steps up,
    step_size_down down), its amplitude scaled by mode: "triangular" (constant),
    "triangular2" (halved each cycle), "exp_range" (gamma ** step), or scale_fn; momentum (or
    Adam's beta1) cycles the other way between max_momentum and base_momentum. Step it every
    batch."""

    def __init__(self, optimizer: Optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1):
        groups = optimizer.param_groups
        bases = per_group(base_lr, optimizer, "CyclicLR")
        self.max_lrs = per_group(max_lr, optimizer, "CyclicLR")
        if last_epoch == -1:
            for group, lr in zip(groups, bases, strict=True):
                group["lr"] = group["initial_lr"] = lr
        down = step_size_up if step_size_down is None else step_size_down
        self.total_size = float(step_size_up + down)
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range', got {mode!r}")
        self.mode, self.gamma, self.scale_fn_custom = mode, gamma, scale_fn
        self.scale_mode = ("iterations" if mode == "exp_range" else "cycle") \
            if scale_fn is None else scale_mode
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if not all("momentum" in g or "betas" in g for g in groups):
                raise ValueError("CyclicLR: cycle_momentum needs an optimizer with momentum "
                                 "or betas (or pass cycle_momentum=False)")
            self.base_momentums = per_group(base_momentum, optimizer, "CyclicLR")
            self.max_momentums = per_group(max_momentum, optimizer, "CyclicLR")
            if last_epoch == -1:
                for group, m in zip(groups, self.max_momentums, strict=True):
                    OneCycleLR._set_momentum(group, m)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = bases  # (the first step ran on initial_lr, which is base_lr when new)

    def _scale(self, x: float) -> float:
        if self.scale_fn_custom is not None:
            return self.scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def step(self, epoch: int | None = None) -> None:
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        factor = x / self.step_ratio if x <= self.step_ratio else \
            (x - 1) / (self.step_ratio - 1)
        scale = self._scale(cycle if self.scale_mode == "cycle" else self.last_epoch)
        for i, group in enumerate(self.optimizer.param_groups):
            base = self.base_lrs[i]
            group["lr"] = base + (self.max_lrs[i] - base) * factor * scale
            if self.cycle_momentum:
                top, low = self.max_momentums[i], self.base_momentums[i]
                OneCycleLR._set_momentum(group, top - (top - low) * factor * scale)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
