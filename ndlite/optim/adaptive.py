"""Adagrad, Adadelta, Adamax, NAdam and RAdam with PyTorch's update rules (its documentation's
algorithms, the defaults of its single-tensor path). These are composed from tensor ops on
every backend (no fused kernel: they are rarer than SGD and Adam); the step runs under
no_grad and writes parameters and state in place."""

from __future__ import annotations

import math

from .optimizer import Optimizer


def _check(name: str, **values) -> None:
    bad = {k: v for k, v in values.items() if v < 0}
    if bad:
        raise ValueError(f"{name}: invalid hyperparameters {bad} (must be >= 0)")


def _betas(name: str, betas) -> None:
    if not all(0 <= b < 1 for b in betas):
        raise ValueError(f"{name}: betas must be in [0, 1), got {betas}")


class Adagrad(Optimizer):
    """sum += g^2; p -= lr / (1 + (step - 1) lr_decay) * g / (sqrt(sum) + eps).

    >>> import ndlite
    >>> p = ndlite.nn.Parameter(ndlite.tensor([1.0]))
    >>> opt = ndlite.optim.Adagrad([p], lr=0.1)
    >>> (p * 3).sum().backward(); opt.step(); round(p.item(), 4)
    0.9
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, **options):
        _check("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
               initial_accumulator_value=initial_accumulator_value)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps), **options)

    def update(self, param, grad, state, group):
        if "sum" not in state:
            state["sum"] = param.new_full(param.shape, group["initial_accumulator_value"])
        state["step"] = step = state.get("step", 0) + 1
        if group["weight_decay"]:
            grad = grad + param * group["weight_decay"]
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].add_(grad * grad)
        param.sub_(grad / (state["sum"].sqrt() + group["eps"]) * clr)


class Adadelta(Optimizer):
    """v = rho v + (1 - rho) g^2; delta = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho u + (1 - rho) delta^2; p -= lr delta."""

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, **options):
        _check("Adadelta", lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0 <= rho <= 1:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay),
                         **options)

    def update(self, param, grad, state, group):
        square_avg = self.buffer(state, "square_avg", param)
        acc_delta = self.buffer(state, "acc_delta", param)
        state["step"] = state.get("step", 0) + 1
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"]:
            grad = grad + param * group["weight_decay"]
        square_avg.copy_(square_avg * rho + grad * grad * (1 - rho))
        delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
        acc_delta.copy_(acc_delta * rho + delta * delta * (1 - rho))
        param.sub_(delta * group["lr"])


class Adamax(Optimizer):
    """m = b1 m + (1 - b1) g; u = max(b2 u, |g| + eps); p -= lr / (1 - b1^t) * m / u."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, **options):
        _check("Adamax", lr=lr, eps=eps, weight_decay=weight_decay)
        _betas("Adamax", betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay), **options)

    def update(self, param, grad, state, group):
        exp_avg = self.buffer(state, "exp_avg", param)
        exp_inf = self.buffer(state, "exp_inf", param)
        state["step"] = step = state.get("step", 0) + 1
        beta1, beta2 = group["betas"]
        if group["weight_decay"]:
            grad = grad + param * group["weight_decay"]
        exp_avg.copy_(exp_avg * beta1 + grad * (1 - beta1))
        exp_inf.copy_((exp_inf * beta2).maximum(grad.abs() + group["eps"]))
        param.sub_(exp_avg / exp_inf * (group["lr"] / (1 - beta1 ** step)))


class NAdam(Optimizer):
    """Adam with Nesterov momentum and PyTorch's momentum schedule
    mu_t = b1 (1 - 0.5 * 0.96^(t momentum_decay))."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, **options):
        _check("NAdam", lr=lr, eps=eps, weight_decay=weight_decay,
               momentum_decay=momentum_decay)
        _betas("NAdam", betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay), **options)

    def update(self, param, grad, state, group):
        exp_avg = self.buffer(state, "exp_avg", param)
        exp_avg_sq = self.buffer(state, "exp_avg_sq", param)
        state["step"] = step = state.get("step", 0) + 1
        lr, (beta1, beta2), decay = group["lr"], group["betas"], group["momentum_decay"]
        if group["weight_decay"]:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * group["weight_decay"])
            else:
                grad = grad + param * group["weight_decay"]
        mu = beta1 * (1 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((step + 1) * decay))
        state["mu_product"] = mu_product = state.get("mu_product", 1.0) * mu
        exp_avg.copy_(exp_avg * beta1 + grad * (1 - beta1))
        exp_avg_sq.copy_(exp_avg_sq * beta2 + grad * grad * (1 - beta2))
        denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt() + group["eps"]
        param.sub_(grad / denom * (lr * (1 - mu) / (1 - mu_product)))
        param.sub_(exp_avg / denom * (lr * mu_next / (1 - mu_product * mu_next)))


class RAdam(Optimizer):
    """Adam with the variance of its adaptive rate rectified (Liu et al. 2020): while
    rho_t = rho_inf - 2 t b2^t / (1 - b2^t) is at most 5 the step is momentum SGD with the
    bias-corrected first moment, after that Adam's step times the rectification term."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, **options):
        _check("RAdam", lr=lr, eps=eps, weight_decay=weight_decay)
        _betas("RAdam", betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay), **options)

    def update(self, param, grad, state, group):
        exp_avg = self.buffer(state, "exp_avg", param)
        exp_avg_sq = self.buffer(state, "exp_avg_sq", param)
        state["step"] = step = state.get("step", 0) + 1
        lr, (beta1, beta2) = group["lr"], group["betas"]
        if group["weight_decay"]:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * group["weight_decay"])
            else:
                grad = grad + param * group["weight_decay"]
        exp_avg.copy_(exp_avg * beta1 + grad * (1 - beta1))
        exp_avg_sq.copy_(exp_avg_sq * beta2 + grad * grad * (1 - beta2))
        correction1, correction2 = 1 - beta1 ** step, 1 - beta2 ** step
        corrected = exp_avg / correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho = rho_inf - 2 * step * beta2 ** step / correction2
        if rho > 5.0:
            rect = math.sqrt((rho - 4) * (rho - 2) * rho_inf /
                             ((rho_inf - 4) * (rho_inf - 2) * rho))
            adaptive = math.sqrt(correction2) / (exp_avg_sq.sqrt() + group["eps"])
            param.sub_(corrected * lr * adaptive * rect)
        else:
            param.sub_(corrected * lr)


__all__ = ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam"]
