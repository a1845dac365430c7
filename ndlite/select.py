"""`select_backend`: the fastest backend for your model, measured on this machine.

A GPU launch costs microseconds of host work, so a small model often trains faster on the CPU
and a large one on the GPU; where the line falls depends on the model, the batch and the
machine. `select_backend` does not guess: it times a few training steps (forward, loss,
backward, optimizer step) of your model on every available backend and returns the fastest
with the measured table. The model is left as it was (backend, weights, gradients, mode).

>>> import ndlite
>>> model = ndlite.nn.Sequential(ndlite.nn.Linear(8, 16), ndlite.nn.ReLU(),
...                              ndlite.nn.Linear(16, 2))
>>> choice = ndlite.select_backend(model, ndlite.randn(4, 8), backends=["numpy"], budget=0.05)
>>> choice.name
'numpy'
>>> ndlite.set_backend(choice.backend)  # or model.to(choice.backend)
numpy
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .benchmark import seconds_per_call
from .device.protocol import Backend
from .device.registry import known_backends, probe


@dataclass
class BackendChoice:
    """What `select_backend` measured: the fastest backend and every backend's time."""

    backend: Backend
    #: seconds per training step, by backend name, fastest first
    seconds: dict[str, float]
    #: backends that could not run, by name, with the reason
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.backend.name

    def table(self) -> str:
        """The measurements as a text table, fastest first."""
        best = self.seconds[self.name]
        lines = [f"{'backend':12s} {'ms/step':>10s} {'vs fastest':>11s}"]
        for name, seconds in self.seconds.items():
            lines.append(f"{name:12s} {seconds * 1e3:10.3f} {seconds / best:10.2f}x")
        lines += [f"{name:12s} {'-':>10s}  skipped: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _on(value, backend):
    from .creation import tensor
    from .tensor import Tensor

    if isinstance(value, Tensor):
        return value.detach().to(backend)
    return tensor(np.asarray(value), backend=backend)


def _as_tuple(values) -> tuple:
    return tuple(values) if isinstance(values, (tuple, list)) else (values,)


def _default_loss(output, *targets):
    """The mean of the output (any scalar does to time a step)."""
    return output.mean()


def select_backend(model, example_inputs, targets=(), *,
                   loss_fn: Callable | None = None,
                   optimizer: Callable | None = None,
                   backends: Sequence[str | Backend] | None = None,
                   budget: float = 0.5) -> BackendChoice:
    """Time training steps of `model` on each backend and return the fastest (a
    `BackendChoice` with the measured table).

    `example_inputs` (a tensor, array or tuple of them) is one batch as the model gets it;
    `loss_fn(output, *targets)` makes the scalar to differentiate (default: the output's mean);
    `optimizer(params)` builds the optimizer to step (default: SGD); `backends` defaults to
    every backend ndlite knows, those that cannot run listed in `.skipped` with the reason;
    `budget` is about the seconds spent timing each backend.
    """
    from . import optim
    from .nn import Module

    if not isinstance(model, Module):
        raise TypeError(f"select_backend: model must be an ndlite.nn.Module, got "
                        f"{type(model).__name__}")
    inputs, targets = _as_tuple(example_inputs), _as_tuple(targets)
    loss_fn = loss_fn or _default_loss
    optimizer = optimizer or (lambda params: optim.SGD(params, lr=1e-3))
    params = list(model.parameters())
    if not params:
        raise ValueError("select_backend: the model has no parameters to train")
    home = params[0].backend
    saved = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    grads = [p.grad for p in params]
    training = model.training
    seconds, skipped, started = {}, {}, {}
    try:
        for spec in backends if backends is not None else known_backends():
            backend, why = (spec, "") if isinstance(spec, Backend) else probe(spec)
            if backend is None:
                skipped[str(spec)] = why
                continue
            if backend.name in started:
                continue
            started[backend.name] = backend
            try:
                seconds[backend.name] = _time_steps(model, params, inputs, targets, loss_fn,
                                                    optimizer, backend, budget)
            except Exception as exc:  # noqa: BLE001 - a backend that fails is reported
                skipped[backend.name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        for p in params:
            p.grad = None
        model.to(home)
        model.load_state_dict(saved)
        for p, grad in zip(params, grads):
            p.grad = grad
        model.train(training)
    if not seconds:
        raise RuntimeError("select_backend: no backend could run the model: " +
                           "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    seconds = dict(sorted(seconds.items(), key=lambda item: item[1]))
    return BackendChoice(started[next(iter(seconds))], seconds, skipped)


def _time_steps(model, params, inputs, targets, loss_fn, optimizer, backend, budget) -> float:
    for p in params:
        p.grad = None
    model.to(backend)
    model.train()
    x = [_on(v, backend) for v in inputs]
    y = [_on(v, backend) for v in targets]
    opt = optimizer(params)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(*x), *y)
        loss.backward()
        opt.step()

    return seconds_per_call(step, backend.synchronize, budget=budget, repeats=3, warmup=2)
