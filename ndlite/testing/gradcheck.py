"""Finite-difference gradient checks (float64, central differences, random directions).

For f with a random cotangent v, L(x) = sum_i <f(x)_i, v_i>. The analytical directional
derivative <grad L(x), d> from backward must match (L(x + eps d) - L(x - eps d)) / (2 eps)
within atol + rtol * |value| (DESIGN.md: eps 1e-6, atol 1e-5, rtol 1e-3), for a few seeded
random directions d. `gradgradcheck` runs the same check on the gradient function itself,
which proves second derivatives (and so the double-backward of every op it touches).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import ndlite

from ..dtypes import is_floating

EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3


class GradcheckError(AssertionError):
    pass


def _outputs(out) -> list:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o for o in outs if isinstance(o, ndlite.Tensor) and is_floating(o.dtype)]


def _loss(fn, tensors, cotangents):
    outs = _outputs(fn(tensors))
    total = None
    for o, v in zip(outs, cotangents, strict=False):
        term = (o * ndlite.tensor(v, dtype=o.dtype, backend=o.backend)).sum()
        total = term if total is None else total + term
    return total


def gradcheck(fn: Callable, inputs: Sequence[np.ndarray], grad: Sequence[int],
              backend="numpy", directions: int = 2, seed: int = 0, eps: float = EPS,
              atol: float = ATOL, rtol: float = RTOL, name: str = "fn") -> None:
    """Raise GradcheckError unless fn's backward matches central differences.

    `fn(tensors)` returns a tensor or a tuple of tensors; `grad` lists the inputs to check.

    >>> import numpy as np, ndlite
    >>> gradcheck(lambda t: t[0].tanh() * t[1], [np.ones(3), np.arange(3.0)], [0, 1])
    """
    rng = np.random.default_rng(seed)
    inputs = [np.asarray(a) for a in inputs]
    for i in grad:
        if inputs[i].dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} must be float64, got {inputs[i].dtype}")

    def make(arrays, requires):
        return [ndlite.tensor(a, backend=backend, requires_grad=requires and i in grad)
                for i, a in enumerate(arrays)]

    tensors = make(inputs, True)
    with ndlite.enable_grad():
        outs = _outputs(fn(tensors))
    if not outs:
        return
    cotangents = [rng.standard_normal(o.shape) for o in outs]
    with ndlite.enable_grad():
        loss = _loss(fn, tensors, cotangents)
    if loss is None or not loss.requires_grad:
        analytic = [np.zeros_like(inputs[i]) for i in grad]
    else:
        found = ndlite.autograd.grad(loss, [tensors[i] for i in grad], allow_unused=True)
        analytic = [np.zeros_like(inputs[i]) if g is None else g.detach().numpy().copy()
                    for g, i in zip(found, grad, strict=False)]
    for k in range(directions):
        d = {i: rng.standard_normal(inputs[i].shape) for i in grad}
        plus = [a + eps * d[i] if i in grad else a for i, a in enumerate(inputs)]
        minus = [a - eps * d[i] if i in grad else a for i, a in enumerate(inputs)]
        with ndlite.no_grad():
            lp = _loss(fn, make(plus, False), cotangents).item()
            lm = _loss(fn, make(minus, False), cotangents).item()
        numeric = (lp - lm) / (2 * eps)
        exact = float(sum(np.sum(g * d[i]) for g, i in zip(analytic, grad, strict=False)))
        if not abs(numeric - exact) <= atol + rtol * abs(numeric):
            raise GradcheckError(
                f"{name}: directional derivative {exact!r} from backward differs from the "
                f"central difference {numeric!r} (direction {k}, inputs of shapes "
                f"{[a.shape for a in inputs]})")


def gradgradcheck(fn: Callable, inputs: Sequence[np.ndarray], grad: Sequence[int],
                  backend="numpy", seed: int = 0, name: str = "fn", **kw) -> None:
    """gradcheck of x -> grad_x L(x): second derivatives through create_graph=True."""
    rng = np.random.default_rng(seed + 1)
    probe = [ndlite.tensor(a, backend=backend) for a in inputs]
    with ndlite.no_grad():
        outs = _outputs(fn(probe))
    cotangents = [rng.standard_normal(o.shape) for o in outs]

    def gradient(tensors):
        ts = [t if t.requires_grad or i not in grad else t.detach().requires_grad_()
              for i, t in enumerate(tensors)]
        with ndlite.enable_grad():
            loss = _loss(fn, ts, cotangents)
            if loss is None or not loss.requires_grad:
                return ()
            found = ndlite.autograd.grad(loss, [ts[i] for i in grad], create_graph=True,
                                         allow_unused=True)
        return tuple(g for g in found if g is not None)

    gradcheck(gradient, inputs, grad, backend=backend, seed=seed, name=f"grad of {name}", **kw)
