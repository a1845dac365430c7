"""autocast: each op's dtype by its category (ndlite.amp_state.POLICY), values and gradients
against float64 NumPy math on the same half-rounded operands, the parameter-cast cache, nesting,
decorators and threads. Torch-free; test_amp_torch.py compares with PyTorch."""

import threading
import warnings

import numpy as np
import pytest

import ndlite
from ndlite.amp_state import FP32, LOW, POLICY, state, switch
from ndlite.nn import functional as F
from ndlite.ops.registry import OPS

f16 = ndlite.float16


def _t(shape, seed=0, requires_grad=False, dtype=np.float32):
    values = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return ndlite.tensor(values, requires_grad=requires_grad)


def test_policy_names_are_ops():
    assert set(POLICY) <= set(OPS), sorted(set(POLICY) - set(OPS))


def test_low_ops_run_in_the_region_dtype():
    x, w, b = _t((4, 3)), _t((5, 3), 1, True), _t((5,), 2, True)
    img, k = _t((2, 3, 6, 6), 3), _t((4, 3, 3, 3), 4, True)
    with ndlite.autocast(dtype=f16):
        outs = {"linear": F.linear(x, w, b), "matmul": x @ w.T, "mm": ndlite.mm(x, w.T),
                "bmm": ndlite.bmm(_t((2, 4, 3)), _t((2, 3, 2), 5)),
                "conv2d": F.conv2d(img, k, padding=1),
                "conv1d": F.conv1d(_t((2, 3, 8)).half(), _t((4, 3, 3), 6, True)),
                "conv_transpose2d": F.conv_transpose2d(img.half(), _t((3, 2, 3, 3), 7, True)),
                "lstm_cell": ndlite.lstm_cell(_t((2, 3)).half(), (_t((2, 4)), _t((2, 4))),
                                              _t((16, 3), 8), _t((16, 4), 9))[0],
                "gru_cell": ndlite.gru_cell(_t((2, 3)), _t((2, 4)).half(), _t((12, 3), 8),
                                            _t((12, 4), 9))}
    for name, y in outs.items():
        assert y.dtype == f16, name
        assert POLICY[name] == LOW


def test_fp32_ops_run_in_float32():
    h = _t((4, 5)).half()
    target = ndlite.tensor([0, 1, 2, 3])
    with ndlite.autocast(dtype=f16):
        outs = {"exp": h.exp(), "log": h.abs().log(), "pow": h ** 2, "sum": h.sum(),
                "softmax": F.softmax(h, dim=1), "log_softmax": F.log_softmax(h, dim=1),
                "layer_norm": F.layer_norm(h, (5,)), "cross_entropy": F.cross_entropy(h, target),
                "mse_loss": F.mse_loss(h, h * 0.5), "cumsum": h.cumsum(dim=1),
                "l1_loss": F.l1_loss(h, h * 0.5), "group_norm": F.group_norm(h, 1),
                "nll_loss": F.nll_loss(h, target), "logsumexp": h.logsumexp(dim=1)}
    for name, y in outs.items():
        assert y.dtype == ndlite.float32, name
        assert POLICY[name] == FP32


def test_other_ops_keep_their_inputs_dtype_and_float64_is_never_cast():
    h, f = _t((3, 3)).half(), _t((3, 3), 1)
    d = _t((3, 3), 2, dtype=np.float64)
    with ndlite.autocast(dtype=f16):
        assert h.relu().dtype == f16 and (h * 2).dtype == f16 and h.tanh().dtype == f16
        assert (h + f).dtype == ndlite.float32  # promotion, as outside
        assert (d @ d).dtype == ndlite.float64 and d.exp().dtype == ndlite.float64
        assert ndlite.cat([h, f]).dtype == ndlite.float32  # promote: the widest input
    assert (f @ f).dtype == ndlite.float32  # the region is over


def test_linear_values_match_float64_on_half_operands():
    x, w, b = _t((8, 16)), _t((4, 16), 1), _t((4,), 2)
    with ndlite.autocast(dtype=f16):
        y = F.linear(x, w, b)
    r = lambda t: t.detach().numpy().astype(np.float16).astype(np.float64)  # noqa: E731
    want = r(x) @ r(w).T + r(b)
    np.testing.assert_allclose(y.numpy().astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_gradients_flow_to_float32_parameters():
    """A two-layer net under autocast: the float32 parameters get float32 gradients equal to
    float64 math on the half-rounded operands (within half precision)."""
    x, w1, w2 = _t((6, 5)), _t((7, 5), 1, True), _t((3, 7), 2, True)
    target = ndlite.tensor([0, 1, 2, 0, 1, 2])
    with ndlite.autocast(dtype=f16):
        hidden = F.linear(x, w1).relu()
        loss = F.cross_entropy(F.linear(hidden, w2), target)
    assert loss.dtype == ndlite.float32
    loss.backward()
    assert w1.grad.dtype == ndlite.float32 and w2.grad.dtype == ndlite.float32
    r = lambda t: t.detach().numpy().astype(np.float16).astype(np.float64)  # noqa: E731
    xd, w1d, w2d = r(x), r(w1), r(w2)
    h = np.maximum(xd @ w1d.T, 0).astype(np.float16).astype(np.float64)
    z = (h @ w2d.T).astype(np.float16).astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    g = p.copy()
    g[np.arange(6), target.numpy()] -= 1
    g /= 6
    np.testing.assert_allclose(w2.grad.numpy(), g.T @ h, rtol=2e-2, atol=2e-3)
    gh = (g @ w2d) * (h > 0)
    np.testing.assert_allclose(w1.grad.numpy(), gh.T @ xd, rtol=2e-2, atol=2e-3)


def test_parameter_casts_are_cached_per_region():
    x, w = _t((2, 3)), _t((4, 3), 1, True)
    with ndlite.autocast(dtype=f16):
        a, b = F.linear(x, w), F.linear(x, w)
        assert a._node.saved[1] is b._node.saved[1]  # one cast of w
        assert len(state.cache) == 1
        (a.float().sum() + b.float().sum()).backward()
    assert not state.cache  # cleared when the region ends
    np.testing.assert_allclose(w.grad.numpy(), np.full((4, 3), 2 * x.numpy().sum(0)),
                               rtol=2e-3)
    with ndlite.autocast(dtype=f16, cache_enabled=False):
        a, b = F.linear(x, w), F.linear(x, w)
        assert a._node.saved[1] is not b._node.saved[1] and not state.cache
    with ndlite.autocast(dtype=f16), ndlite.no_grad():
        F.linear(x, w)
        assert not state.cache  # a cast made without recording must not serve a later step


def test_nesting_disabling_and_decorator():
    x = _t((2, 2))
    with ndlite.autocast(dtype=f16):
        with ndlite.autocast(enabled=False):
            assert (x @ x).dtype == ndlite.float32 and not ndlite.is_autocast_enabled()
        assert (x @ x).dtype == f16 and ndlite.is_autocast_enabled()
        assert ndlite.get_autocast_dtype() == f16

    @ndlite.amp.autocast(device_type="cuda")
    def f(a):
        return a @ a

    assert f(x).dtype == f16 and not ndlite.is_autocast_enabled()
    with ndlite.cuda.amp.autocast():
        assert (x @ x).dtype == f16
    assert state.nesting == 0 and switch.on == 0


def test_autocast_is_per_thread():
    x, seen = _t((2, 2)), []
    with ndlite.autocast(dtype=f16):
        worker = threading.Thread(target=lambda: seen.append((x @ x).dtype))
        worker.start()
        worker.join()
        assert (x @ x).dtype == f16
    assert seen == [ndlite.float32]


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="device_type"):
        ndlite.amp.autocast(device_type="tpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        region = ndlite.autocast(dtype=ndlite.float32)
    assert "not supported" in str(caught[0].message)
    with region:
        assert (_t((2, 2)) @ _t((2, 2))).dtype == ndlite.float32  # disabled, as PyTorch


def test_every_backend_with_float16(backend):
    if f16 not in backend.dtypes:
        pytest.skip(f"{backend.name} has no float16")
    x = ndlite.tensor(np.ones((2, 3), np.float32), backend=backend)
    w = ndlite.tensor(np.ones((4, 3), np.float32), backend=backend, requires_grad=True)
    with ndlite.autocast(dtype=f16):
        y = F.linear(x, w)
        loss = F.log_softmax(y, dim=1).sum()
    assert y.dtype == f16 and loss.dtype == ndlite.float32
    loss.backward()
    assert w.grad.dtype == ndlite.float32
