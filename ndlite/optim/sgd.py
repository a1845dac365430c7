"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from .optimizer import Optimizer, batched


class SGD(Optimizer):
    """PyTorch's SGD: g = grad + weight_decay * p; with momentum, buf = g on the first step,
    then buf = momentum * buf + (1 - dampening) * g, and g = buf (or g + momentum * buf with
    nesterov); p -= lr * g.

    >>> import ndlite
    >>> p = ndlite.nn.Parameter(ndlite.tensor([1.0]))
    >>> opt = ndlite.optim.SGD([p], lr=0.1)
    >>> (p * 3).sum().backward(); opt.step(); round(p.item(), 4)
    0.7
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, **options):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be non-negative, got "
                             f"lr={lr}, momentum={momentum}, weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov), **options)

    def _bind(self, group):
        """The fused step of one parameter with `group`'s settings bound."""
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        nesterov, weight_decay, buffer = group["nesterov"], group["weight_decay"], self.buffer

        def states(param, state):
            """(its momentum buffer, whether this is its first step) of one parameter."""
            if not momentum:
                return None, False
            first = "momentum_buffer" not in state
            return buffer(state, "momentum_buffer", param)._data, first

        def update(param, grad, state):
            buf, first = states(param, state)
            param._backend.sgd_step(param._data, grad._data, buf, lr, momentum, dampening,
                                    nesterov, weight_decay, first)

        def batch(items):
            batched(items, states, lambda b, params, grads, bufs, firsts: b.sgd_steps(
                params, grads, bufs, lr, momentum, dampening, nesterov, weight_decay, firsts))

        update.batch = batch
        return update
