"""ConstantLR, PolynomialLR, MultiplicativeLR, CosineAnnealingWarmRestarts and CyclicLR
(ndlite/optim/lr_scheduler/more.py) against their formulas written out here (each sequence
was also compared with PyTorch 2.13's schedulers, to 1e-12, when written)."""

import math

import pytest

import ndlite
from ndlite.optim import lr_scheduler as L


def _rates(make, steps=20, momentum=True, epochs=None):
    opt = ndlite.optim.SGD([ndlite.nn.Parameter(ndlite.zeros(1))], lr=0.1,
                           momentum=0.9 if momentum else 0.0)
    sched = make(opt)
    out = []
    for i in range(steps):
        out.append((sched.get_last_lr()[0], opt.param_groups[0]["momentum"]))
        sched.step(None if epochs is None else epochs[i])
    return out


def test_constant_polynomial_and_multiplicative():
    got = [lr for lr, _ in _rates(lambda o: L.ConstantLR(o, factor=0.25, total_iters=4), 8)]
    assert got == pytest.approx([0.025] * 4 + [0.1] * 4)
    got = [lr for lr, _ in _rates(lambda o: L.PolynomialLR(o, total_iters=10, power=2.0), 14)]
    assert got == pytest.approx([0.1 * (1 - min(e, 10) / 10) ** 2 for e in range(14)])
    got = [lr for lr, _ in _rates(lambda o: L.MultiplicativeLR(o, lambda e: 0.5), 5)]
    assert got == pytest.approx([0.1, 0.05, 0.025, 0.0125, 0.00625])


def test_warm_restarts_follow_sgdr():
    def sgdr(t_0, t_mult, eta_min, steps):
        out, t_i, t_cur = [], t_0, 0
        for _ in range(steps):
            out.append(eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2)
            t_cur += 1
            if t_cur >= t_i:
                t_cur, t_i = t_cur - t_i, t_i * t_mult
        return out

    for t_0, t_mult, eta_min in ((5, 1, 0.01), (3, 2, 0.0)):
        got = [lr for lr, _ in _rates(lambda o, a=t_0, m=t_mult, e=eta_min:
                                      L.CosineAnnealingWarmRestarts(o, T_0=a, T_mult=m,
                                                                    eta_min=e), 25)]
        assert got == pytest.approx(sgdr(t_0, t_mult, eta_min, 25), abs=1e-12)
    # a fractional epoch: 3 + 6 = 9 epochs end the first two cycles of 3 * 2 ** n
    got = _rates(lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2), 3,
                 epochs=[10.5, 4.5, 0.0])
    assert got[1][0] == pytest.approx(0.05 * (1 + math.cos(math.pi * 1.5 / 12)))
    assert got[2][0] == pytest.approx(0.05 * (1 + math.cos(math.pi * 1.5 / 6)))
    with pytest.raises(ValueError, match="T_mult must be an int >= 1"):
        _rates(lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=0), 1)


def test_cyclic_rates_and_momentum():
    def triangle(step, up, down):
        x = step % (up + down)
        return x / up if x <= up else 1 - (x - up) / down

    got = _rates(lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=5), 20)
    for step, (lr, momentum) in enumerate(got):
        f = triangle(step, 3, 5)
        assert lr == pytest.approx(0.01 + 0.09 * f) and momentum == pytest.approx(0.9 - 0.1 * f)
    got = _rates(lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="triangular2"), 12)
    assert [lr for lr, _ in got][::2] == pytest.approx(
        [0.01, 0.1, 0.01, 0.055, 0.01, 0.0325])
    got = _rates(lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="exp_range",
                                      gamma=0.9), 6)
    assert got[1][0] == pytest.approx(0.01 + 0.09 * 0.5 * 0.9) and \
        got[2][0] == pytest.approx(0.01 + 0.09 * 0.81)
    with pytest.raises(ValueError, match="cycle_momentum needs an optimizer with momentum"):
        opt = ndlite.optim.Adagrad([ndlite.nn.Parameter(ndlite.zeros(1))], lr=0.1)
        L.CyclicLR(opt, 0.01, 0.1)
    adam = ndlite.optim.Adam([ndlite.nn.Parameter(ndlite.zeros(1))], lr=0.1)
    L.CyclicLR(adam, 0.01, 0.1, step_size_up=2).step()
    assert adam.param_groups[0]["betas"][0] == pytest.approx(0.85)
