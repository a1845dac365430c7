"""GradScaler in float32 training with injected inf/NaN gradients (no half precision needed):
skipped steps, the scale's backoff and growth, exact unscaling (powers of two), one host sync
per step, state_dict, the pass-through when disabled and the usage errors. Torch-free;
test_amp_torch.py compares the scale sequence with torch.amp.GradScaler."""

import math

import numpy as np
import pytest

import ndlite
from ndlite import nn, optim
from ndlite.amp import GradScaler


def _model(seed=0):
    ndlite.manual_seed(seed)
    return nn.Linear(3, 2)


def _batch():
    rng = np.random.default_rng(1)
    return (ndlite.tensor(rng.standard_normal((4, 3)).astype(np.float32)),
            ndlite.tensor(rng.standard_normal((4, 2)).astype(np.float32)))


def _step(model, opt, scaler, poison=None):
    x, y = _batch()
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    if poison is not None:  # an overflowed gradient
        model.weight.grad[0, 0] = poison
    out = scaler.step(opt)
    scaler.update()
    return out


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_defaults():
    s = GradScaler()
    assert s.get_scale() == 65536.0 and s.is_enabled()
    assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == \
        (2.0, 0.5, 2000)
    assert s.state_dict() == {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                              "growth_interval": 2000, "_growth_tracker": 0}
    assert ndlite.cuda.amp.GradScaler(init_scale=8.0).get_scale() == 8.0


def test_scale_multiplies_tensors_and_nested_lists():
    s = GradScaler(init_scale=4.0)
    a, b = ndlite.tensor([1.0, 2.0]), ndlite.tensor(3.0)
    out = s.scale([a, (b,)])
    assert out[0].tolist() == [4.0, 8.0] and out[1][0].item() == 12.0
    assert s.scale(a.half()).dtype == ndlite.float32  # as PyTorch's float32 scale tensor


@pytest.mark.parametrize("poison", [math.inf, -math.inf, math.nan])
def test_inf_or_nan_skips_the_step_and_halves_the_scale(poison):
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    s = GradScaler(init_scale=1024.0)
    before = _params(model)
    assert _step(model, opt, s, poison) is None
    for p, q in zip(before, _params(model)):
        np.testing.assert_array_equal(p, q)  # skipped
    assert s.get_scale() == 512.0


def test_clean_steps_equal_unscaled_training_and_the_scale_grows():
    """Scaling by a power of two and back is exact: the scaled run's parameters are bitwise
    those of plain float32 training, step for step, except the skipped step."""
    scaled, plain = _model(), _model()
    opt_s = optim.Adam(scaled.parameters(), lr=0.01)
    opt_p = optim.Adam(plain.parameters(), lr=0.01)
    s = GradScaler(init_scale=2.0 ** 10, growth_interval=3)
    off = GradScaler(enabled=False)
    scales = []
    for i in range(8):
        poisoned = i == 4
        _step(scaled, opt_s, s, math.inf if poisoned else None)
        if not poisoned:
            _step(plain, opt_p, off)
        scales.append(s.get_scale())
        for p, q in zip(_params(scaled), _params(plain)):
            np.testing.assert_array_equal(p, q)
    assert scales == [1024.0, 1024.0, 2048.0, 2048.0, 1024.0, 1024.0, 1024.0, 2048.0]
    assert s.state_dict()["_growth_tracker"] == 0


def test_unscale_then_clip_then_step():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    s = GradScaler(init_scale=256.0)
    x, y = _batch()
    loss = nn.functional.mse_loss(model(x), y)
    s.scale(loss).backward()
    scaled_grad = model.weight.grad.detach().numpy().copy()
    s.unscale_(opt)
    np.testing.assert_array_equal(model.weight.grad.detach().numpy(), scaled_grad / 256.0)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)  # no second unscale
    with pytest.raises(RuntimeError, match="step"):
        s.step(opt)
    s.update()


def test_one_host_sync_per_step():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    s = GradScaler()
    x, y = _batch()
    s.scale(nn.functional.mse_loss(model(x), y)).backward()
    backend = x._backend
    reads = []
    original = backend.to_numpy
    backend.to_numpy = lambda a: reads.append(1) or original(a)
    try:
        s.step(opt)
        s.update()
    finally:
        del backend.to_numpy
    assert len(reads) == 1


def test_state_dict_round_trip_and_disabled_pass_through():
    s = GradScaler(init_scale=8.0, growth_interval=5)
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    _step(model, opt, s)
    t = GradScaler()
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict() == {
        "scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 5,
        "_growth_tracker": 1}
    off = GradScaler(enabled=False)
    loss = ndlite.tensor(2.0)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(RuntimeError, match="empty"):
        GradScaler().load_state_dict({})
    before = _params(model)
    _step(model, opt, off, math.inf)  # disabled: the step is taken, inf and all
    assert not np.array_equal(before[0], _params(model)[0])


def test_usage_errors():
    with pytest.raises(AssertionError, match="No inf checks"):
        s = GradScaler()
        s.scale(ndlite.tensor(1.0))
        s.update()
    with pytest.raises(AssertionError, match="scale"):
        GradScaler().step(optim.SGD(_model().parameters(), lr=0.1))
    with pytest.raises(ValueError, match="growth_factor"):
        GradScaler(growth_factor=0.5)
    s = GradScaler()
    s.scale(ndlite.tensor(1.0))
    with pytest.raises(RuntimeError, match="[Cc]losure"):
        s.step(optim.SGD(_model().parameters(), lr=0.1), closure=lambda: 0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on the half overflow
def test_float16_overflow_backs_off_until_the_gradients_fit():
    """Under float16 autocast a scale of 2^40 overflows the half gradients of the activations:
    those steps are skipped and the scale halves until a step goes through."""
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)
    s = GradScaler(init_scale=2.0 ** 40)
    x, y = _batch()
    taken = []
    for _ in range(40):
        before = _params(model)
        opt.zero_grad()
        with ndlite.autocast(dtype=ndlite.float16):
            loss = nn.functional.mse_loss(model(x), y)
        s.scale(loss).backward()
        s.step(opt)
        s.update()
        taken.append(not all(np.array_equal(p, q) for p, q in zip(before, _params(model))))
        if taken[-1]:
            break
    assert taken[0] is False and taken[-1] is True
    assert 1.0 <= s.get_scale() <= 2.0 ** 24  # backed off into float16's range
    assert all(np.isfinite(p).all() for p in _params(model))
