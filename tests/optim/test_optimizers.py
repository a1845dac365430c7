"""Optimizers follow PyTorch's documented update rules step by step (rules.py, written
independently in NumPy), update in place without recording a graph, and save/restore state."""

import numpy as np
import pytest
import rules

import ndlite
from ndlite import optim

RNG = np.random.default_rng(1)
P0 = [RNG.standard_normal((3, 2)), RNG.standard_normal(4)]
GRADS = [[RNG.standard_normal(p.shape) for p in P0] for _ in range(5)]

CONFIGS = [
    (optim.SGD, dict(lr=0.1), rules.sgd, dict(lr=0.1)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01), rules.sgd,
     dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    (optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True), rules.sgd,
     dict(lr=0.05, momentum=0.8, nesterov=True)),
    (optim.RMSprop, dict(lr=0.01), rules.rmsprop, dict(lr=0.01)),
    (optim.RMSprop, dict(lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1),
     rules.rmsprop, dict(lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1)),
    (optim.Adam, dict(lr=0.01), rules.adam, dict(lr=0.01)),
    (optim.Adam, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True), rules.adam,
     dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True)),
    (optim.AdamW, dict(lr=0.01), rules.adam, dict(lr=0.01, weight_decay=0.01, decoupled=True)),
    (optim.AdamW, dict(lr=0.02, weight_decay=0.5, amsgrad=True), rules.adam,
     dict(lr=0.02, weight_decay=0.5, amsgrad=True, decoupled=True)),
]


@pytest.mark.parametrize("cls,kwargs,rule,rule_kwargs", CONFIGS,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CONFIGS)])
def test_updates_follow_the_documented_rule(cls, kwargs, rule, rule_kwargs):
    params = [ndlite.nn.Parameter(ndlite.tensor(p)) for p in P0]
    opt = cls(params, **kwargs)
    expected = [p.copy() for p in P0]
    states = [{} for _ in P0]
    for grads in GRADS:
        opt.zero_grad()
        for p, g in zip(params, grads, strict=True):
            p.grad = ndlite.tensor(g)
        opt.step()
        expected = [rule(e, g, s, **rule_kwargs)
                    for e, g, s in zip(expected, grads, states, strict=True)]
        for p, e in zip(params, expected, strict=True):
            np.testing.assert_allclose(p.detach().numpy(), e, rtol=1e-12, atol=1e-12)


def test_step_is_in_place_records_no_graph_and_skips_params_without_grad():
    p, q = ndlite.nn.Parameter(ndlite.ones(3)), ndlite.nn.Parameter(ndlite.ones(2))
    data, version = p._data, p._version
    opt = optim.Adam([p, q], lr=0.1)
    (p * 2).sum().backward()
    opt.step()
    assert p._data is data and p._version == version + 1
    assert p.is_leaf and p.grad_fn is None
    np.testing.assert_array_equal(q.detach().numpy(), np.ones(2))
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0, 0.0] and q.grad is None


def test_state_dict_round_trip_continues_identically(tmp_path):
    def run(steps, opt, params):
        for k in range(steps):
            opt.zero_grad()
            ((params[0] * params[0]).sum() + (params[1] * (k + 1)).sum()).backward()
            opt.step()

    make = lambda: [ndlite.nn.Parameter(ndlite.tensor(p)) for p in P0]  # noqa: E731
    a = make()
    opt_a = optim.RMSprop(a, lr=0.01, momentum=0.9, centered=True)
    run(3, opt_a, a)
    path = tmp_path / "opt.npz"
    ndlite.save({"params": [p.detach() for p in a], "opt": opt_a.state_dict()}, path)
    run(2, opt_a, a)
    saved = ndlite.load(path)
    b = [ndlite.nn.Parameter(t) for t in saved["params"]]
    opt_b = optim.RMSprop(b, lr=0.5)
    opt_b.load_state_dict(saved["opt"])
    assert opt_b.param_groups[0]["lr"] == 0.01
    run(2, opt_b, b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())


def test_param_groups_have_their_own_hyperparameters():
    p, q = ndlite.nn.Parameter(ndlite.ones(1)), ndlite.nn.Parameter(ndlite.ones(1))
    opt = optim.SGD([{"params": [p]}, {"params": [q], "lr": 1.0}], lr=0.1)
    (p + q).sum().backward()
    opt.step()
    assert p.item() == pytest.approx(0.9) and q.item() == pytest.approx(0.0)


def test_bad_hyperparameters_and_parameters():
    p = ndlite.nn.Parameter(ndlite.ones(1))
    with pytest.raises(ValueError):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError):
        optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError):
        optim.Adam([])
    with pytest.raises(TypeError):
        optim.Adam([np.ones(2)])
    with pytest.raises(ndlite.DTypeError):
        optim.Adam([ndlite.ones(2)])  # does not require grad


def test_schedulers_follow_the_closed_forms():
    p = ndlite.nn.Parameter(ndlite.ones(1))
    opt = optim.SGD([p], lr=1.0)
    step = optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    seen = []
    for _ in range(7):
        seen.append(opt.param_groups[0]["lr"])
        step.step()
    assert seen == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]
    opt = optim.Adam([p], lr=0.1)
    cosine = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.01)
    lrs = []
    for _ in range(5):
        lrs.append(cosine.get_last_lr()[0])
        cosine.step()
    expected = [0.01 + 0.09 * (1 + np.cos(np.pi * e / 4)) / 2 for e in range(5)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
