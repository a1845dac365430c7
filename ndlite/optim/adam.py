"""Adam and AdamW (decoupled weight decay), with AMSGrad."""

from __future__ import annotations

from .optimizer import Optimizer, batched


class Adam(Optimizer):
    """PyTorch's Adam: m and v running averages of g and g^2 with bias correction;
    weight_decay adds weight_decay * p to the gradient (L2); amsgrad uses the running max of v.

    >>> import ndlite
    >>> p = ndlite.nn.Parameter(ndlite.tensor([1.0]))
    >>> opt = ndlite.optim.Adam([p], lr=0.1)
    >>> (p * 3).sum().backward(); opt.step(); round(p.item(), 4)
    0.9
    """

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, **options):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"{type(self).__name__}: lr, eps and weight_decay must be "
                             f"non-negative, got lr={lr}, eps={eps}, weight_decay={weight_decay}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"{type(self).__name__}: betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad), **options)

    def _bind(self, group):
        """The fused step of one parameter with `group`'s settings bound."""
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad, decoupled = group["weight_decay"], group["amsgrad"], self.decoupled
        buffer = self.buffer

        def states(param, state):
            """The state buffers of one parameter (exp_avg, exp_avg_sq, max_exp_avg_sq or
            None)."""
            return (buffer(state, "exp_avg", param)._data,
                    buffer(state, "exp_avg_sq", param)._data,
                    buffer(state, "max_exp_avg_sq", param)._data if amsgrad else None)

        def update(param, grad, state):
            step = state.get("step", 0) + 1
            param._backend.adam_step(param._data, grad._data, *states(param, state), step, lr,
                                     beta1, beta2, eps, weight_decay, decoupled)
            state["step"] = step  # counted once the update is made: a failed one counts not

        def batch(items):
            """One backend call per step count (parameters that missed a step lag behind);
            each part's step counts advance once its call has returned."""
            by_step: dict = {}
            for item in items:
                by_step.setdefault(item[2].get("step", 0) + 1, []).append(item)
            for step, part in by_step.items():
                batched(part, states, lambda b, params, grads, *columns, step=step: b.adam_steps(
                    params, grads, *columns, step, lr, beta1, beta2, eps, weight_decay,
                    decoupled))
                for _, _, state in part:
                    state["step"] = step

        update.batch = batch
        return update


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step
    (PyTorch's default weight_decay=0.01)."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, **options):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **options)
