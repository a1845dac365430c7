"""SGD, RMSprop and Adam update all of a group's parameters in one backend call (sgd_steps,
rmsprop_steps, adam_steps: ndlite/device/step_fallbacks.py; CuPy launches one kernel for all
of them; Adam makes one call per step count). Against the one-parameter fused steps
(sgd_step, rmsprop_step, adam_step) called one by one, which the optimizer tests hold to
PyTorch and the reference: the same bits, on every backend."""

import numpy as np
import pytest

import ndlite

SHAPES = [(3, 5), (7,), (4, 1, 3, 3), (5000,), (1,)]  # (5000: more than one block of a chunk)


def _params(backend, dtype, seed=0):
    r = np.random.default_rng(seed)
    return [ndlite.nn.Parameter(ndlite.tensor(r.standard_normal(s), dtype=dtype,
                                              backend=backend)) for s in SHAPES]


def _grads(params, step):
    r = np.random.default_rng(100 + step)
    for i, p in enumerate(params):
        p.grad = None if i == 1 and step == 1 else ndlite.tensor(  # a step without a gradient
            r.standard_normal(p.shape), dtype=p.dtype, backend=p.backend)


def _one_by_one(opt):
    """The optimizer's group update without its `batch`: one backend call per parameter."""
    original = opt.group_update

    def single(group):
        update = original(group)
        return lambda param, grad, state: update(param, grad, state)

    opt.group_update = single
    return opt


CASES = [(ndlite.optim.SGD, dict(lr=0.1)),
         (ndlite.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-2)),
         (ndlite.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
         (ndlite.optim.SGD, dict(lr=0.05, momentum=0.5, dampening=0.3)),
         (ndlite.optim.RMSprop, dict(lr=1e-2)),
         (ndlite.optim.RMSprop, dict(lr=1e-2, momentum=0.9, centered=True, weight_decay=0.1)),
         (ndlite.optim.Adam, dict(lr=1e-2)),
         (ndlite.optim.Adam, dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
         (ndlite.optim.AdamW, dict(lr=1e-2, weight_decay=0.1))]
METHODS = {ndlite.optim.SGD: "sgd_steps", ndlite.optim.RMSprop: "rmsprop_steps",
           ndlite.optim.Adam: "adam_steps", ndlite.optim.AdamW: "adam_steps"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls, settings", CASES, ids=lambda c: str(c))
def test_one_call_per_group_gives_the_bits_of_one_call_per_parameter(backend, cls, settings,
                                                                     dtype, monkeypatch):
    if np.dtype(dtype) not in backend.dtypes:
        pytest.skip(f"{dtype} not on {backend.name}")
    batched, single = _params(backend, dtype), _params(backend, dtype)
    opt_b, opt_s = cls(batched, **settings), _one_by_one(cls(single, **settings))
    calls = []
    method = METHODS[cls]
    original = getattr(backend, method)
    monkeypatch.setattr(backend, method, lambda *a: calls.append(len(a[0])) or original(*a))
    for step in range(3):
        _grads(batched, step)
        _grads(single, step)
        opt_b.step()
        opt_s.step()
    n = len(SHAPES)
    # Adam: the parameter without a gradient at step 1 is a step count behind at step 2
    want = [n, n - 1, n - 1, 1] if METHODS[cls] == "adam_steps" else [n, n - 1, n]
    assert calls == want, "one call per step (and per step count)"
    for a, b in zip(batched, single):
        np.testing.assert_array_equal(a.detach().numpy().view(np.uint8),
                                      b.detach().numpy().view(np.uint8))
    for sa, sb in zip(opt_b.state_dict()["state"].values(), opt_s.state_dict()["state"].values()):
        assert sa.keys() == sb.keys()
        for key in sa:
            va, vb = sa[key], sb[key]
            if hasattr(va, "numpy"):
                np.testing.assert_array_equal(va.numpy(), vb.numpy())
            else:
                assert va == vb


def test_a_group_of_two_dtypes_makes_one_call_per_dtype(backend, monkeypatch):
    if np.dtype("float64") not in backend.dtypes:
        pytest.skip(f"no float64 on {backend.name}")
    batched = _params(backend, "float32")[:3] + _params(backend, "float64", seed=1)[:2]
    single = _params(backend, "float32")[:3] + _params(backend, "float64", seed=1)[:2]
    opt_b = ndlite.optim.SGD(batched, lr=0.1, momentum=0.9)
    opt_s = _one_by_one(ndlite.optim.SGD(single, lr=0.1, momentum=0.9))
    calls = []
    original = backend.sgd_steps
    monkeypatch.setattr(backend, "sgd_steps",
                        lambda *a: calls.append({p.dtype for p in a[0]}) or original(*a))
    for step in (0, 2):  # (step 1 leaves a parameter without a gradient)
        _grads(batched, step)
        _grads(single, step)
        opt_b.step()
        opt_s.step()
    assert calls == [{np.dtype("float32")}, {np.dtype("float64")}] * 2
    for a, b in zip(batched, single):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_a_failed_adam_call_leaves_the_step_counts(backend, monkeypatch):
    params = _params(backend, "float32")
    opt = ndlite.optim.Adam(params, lr=0.1)
    _grads(params, 0)
    opt.step()
    before = [p.detach().numpy().copy() for p in params]

    def refuse(*args):
        raise RuntimeError("refused")

    monkeypatch.setattr(backend, "adam_steps", refuse)
    _grads(params, 2)
    with pytest.raises(RuntimeError, match="refused"):
        opt.step()
    assert [opt.state[id(p)]["step"] for p in params] == [1] * len(params)
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
    monkeypatch.undo()
    opt.step()  # the retry counts step 2, as if the failure had not happened
    assert [opt.state[id(p)]["step"] for p in params] == [2] * len(params)
