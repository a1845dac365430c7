"""RMSprop: gradients scaled by a running root mean square (optionally centered)."""

from __future__ import annotations

from .optimizer import Optimizer, batched


class RMSprop(Optimizer):
    """PyTorch's RMSprop: v = alpha v + (1 - alpha) g^2; centered subtracts the squared
    running mean of g; p -= lr g / (sqrt(v) + eps), through a momentum buffer if momentum > 0.

    >>> import ndlite
    >>> p = ndlite.nn.Parameter(ndlite.tensor([1.0]))
    >>> opt = ndlite.optim.RMSprop([p], lr=0.01)
    >>> (p * 3).sum().backward(); opt.step(); round(p.item(), 4)
    0.9
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 **options):
        if lr < 0 or eps < 0 or momentum < 0 or weight_decay < 0 or not 0 <= alpha:
            raise ValueError(f"RMSprop: invalid hyperparameters lr={lr}, alpha={alpha}, "
                             f"eps={eps}, momentum={momentum}, weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered), **options)

    def _bind(self, group):
        """The fused step of one parameter with `group`'s settings bound."""
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        weight_decay, centered, buffer = group["weight_decay"], group["centered"], self.buffer

        def states(param, state):
            """The state buffers of one parameter (square_avg, grad_avg, momentum_buffer; None
            where unused), its step counted."""
            state["step"] = state.get("step", 0) + 1
            return (buffer(state, "square_avg", param)._data,
                    buffer(state, "grad_avg", param)._data if centered else None,
                    buffer(state, "momentum_buffer", param)._data if momentum > 0 else None)

        def update(param, grad, state):
            param._backend.rmsprop_step(param._data, grad._data, *states(param, state), lr,
                                        alpha, eps, momentum, weight_decay)

        def batch(items):
            batched(items, states, lambda b, params, grads, *columns: b.rmsprop_steps(
                params, grads, *columns, lr, alpha, eps, momentum, weight_decay))

        update.batch = batch
        return update
