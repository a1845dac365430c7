"""Optimizer.group_update (issue 15 item 3): SGD, RMSprop and Adam bind a group's settings once
per step; a change of those settings between steps (an lr scheduler) must still apply, each
group must keep its own, and a subclass that overrides `update` must still be called."""

import numpy as np
import pytest

import ndlite


def _params():
    rng = np.random.default_rng(0)
    return [ndlite.nn.Parameter(ndlite.tensor(rng.standard_normal(s).astype(np.float32)))
            for s in ((3, 2), (2,))]


def _step(opt, params, scale: float) -> None:
    opt.zero_grad()
    sum(((p * p).sum() * scale for p in params), ndlite.tensor(0.0)).backward()
    opt.step()


@pytest.mark.parametrize("make", [
    lambda ps, lr: ndlite.optim.SGD(ps, lr=lr, momentum=0.9),
    lambda ps, lr: ndlite.optim.RMSprop(ps, lr=lr),
    lambda ps, lr: ndlite.optim.Adam(ps, lr=lr),
])
def test_a_changed_lr_applies_at_the_next_step(make):
    a, b = _params(), _params()
    opt_a, opt_b = make(a, 0.1), make(b, 0.1)
    _step(opt_a, a, 1.0)
    _step(opt_b, b, 1.0)
    opt_a.param_groups[0]["lr"] = 0.0  # no update at all from now on
    before = [p.detach().numpy().copy() for p in a]
    _step(opt_a, a, 2.0)
    _step(opt_b, b, 2.0)
    for p, old in zip(a, before, strict=True):
        assert p.detach().numpy().tobytes() == old.tobytes()
    assert any(not np.array_equal(p.detach().numpy(), old) for p, old in zip(b, before))


def test_groups_keep_their_own_settings():
    params = _params()
    opt = ndlite.optim.SGD([{"params": params[:1], "lr": 0.0}, {"params": params[1:]}], lr=0.5)
    before = [p.detach().numpy().copy() for p in params]
    _step(opt, params, 1.0)
    assert params[0].detach().numpy().tobytes() == before[0].tobytes()
    np.testing.assert_allclose(params[1].detach().numpy(), before[1] * (1 - 2 * 0.5))


def test_a_subclass_update_is_called():
    calls = []

    class Logged(ndlite.optim.SGD):
        def update(self, param, grad, state, group):
            calls.append(param.shape)
            super().update(param, grad, state, group)

    params = _params()
    plain = _params()
    _step(Logged(params, lr=0.1, momentum=0.5), params, 1.0)
    _step(ndlite.optim.SGD(plain, lr=0.1, momentum=0.5), plain, 1.0)
    assert calls == [(3, 2), (2,)]
    for p, q in zip(params, plain, strict=True):
        assert p.detach().numpy().tobytes() == q.detach().numpy().tobytes()
