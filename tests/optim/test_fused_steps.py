"""The fused optimizer steps of the device contract (fallback and NumPy backend) follow the
documented update rules step by step, in place."""

import numpy as np
import pytest
import rules

from ndlite.device import fallbacks, get_backend

B = get_backend("numpy")


class Direct:
    def __getattr__(self, name):
        return lambda *args: getattr(fallbacks, name)(B, *args)


IMPLEMENTATIONS = {"fallback": Direct(), "numpy": B}
RNG = np.random.default_rng(0)
P0 = RNG.standard_normal(6)
GRADS = [RNG.standard_normal(6) for _ in range(4)]


def _run(step, expected_rule, buffers):
    p, state, expected = P0.copy(), {}, P0.copy()
    for t, g in enumerate(GRADS, start=1):
        step(p, g, t)
        expected = expected_rule(expected, g, state)
        np.testing.assert_allclose(p, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("momentum,dampening,nesterov,wd",
                         [(0, 0, False, 0), (0.9, 0, False, 0), (0.9, 0.3, False, 0.01),
                          (0.8, 0, True, 0.1)])
def test_sgd_step(impl, momentum, dampening, nesterov, wd):
    buf = np.zeros(6) if momentum else None
    b = IMPLEMENTATIONS[impl]
    _run(lambda p, g, t: b.sgd_step(p, g, buf, 0.1, momentum, dampening, nesterov, wd, t == 1),
         lambda p, g, s: rules.sgd(p, g, s, 0.1, momentum, dampening, nesterov, wd), buf)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("momentum,wd", [(0, 0), (0.5, 0.1)])
def test_rmsprop_step(impl, centered, momentum, wd):
    sq = np.zeros(6)
    ga = np.zeros(6) if centered else None
    buf = np.zeros(6) if momentum else None
    b = IMPLEMENTATIONS[impl]
    _run(lambda p, g, t: b.rmsprop_step(p, g, sq, ga, buf, 0.01, 0.9, 1e-8, momentum, wd),
         lambda p, g, s: rules.rmsprop(p, g, s, 0.01, 0.9, 1e-8, wd, momentum, centered), None)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("decoupled,wd", [(False, 0), (False, 0.1), (True, 0.1)])
def test_adam_step(impl, amsgrad, decoupled, wd):
    m, v = np.zeros(6), np.zeros(6)
    vmax = np.zeros(6) if amsgrad else None
    b = IMPLEMENTATIONS[impl]
    _run(lambda p, g, t: b.adam_step(p, g, m, v, vmax, t, 0.01, 0.9, 0.99, 1e-8, wd, decoupled),
         lambda p, g, s: rules.adam(p, g, s, 0.01, (0.9, 0.99), 1e-8, wd, amsgrad, decoupled),
         None)
