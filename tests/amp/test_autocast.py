"""autocast: each op's dtype by its category (ndlite.amp_state.POLICY), values and gradients
against float64 NumPy math on the same half-rounded operands, the parameter-cast cache, nesting,
decorators and threads. Torch-free; test_amp_torch.py compares with PyTorch."""

import threading
import warnings

import numpy as np
import pytest

import ndlite
from ndlite.amp_state import FP32, LOW, POLICY, state, switch
from ndlite.dtypes import HALF
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


def test_an_exception_leaves_the_region():
    with pytest.raises(ValueError), ndlite.autocast(dtype=f16):
        raise ValueError("inside")
    assert not ndlite.is_autocast_enabled() and switch.on == 0 and not state.cache


def test_a_decorated_function_in_two_threads():
    x, barrier, seen = _t((2, 2)), threading.Barrier(2), []

    @ndlite.autocast(dtype=f16)
    def f():
        barrier.wait()  # both threads inside the same decorator at once
        seen.append((x @ x).dtype)
        barrier.wait()

    workers = [threading.Thread(target=f) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert seen == [f16, f16] and switch.on == 0


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


def _policy_cases():
    """One call per op name of the policy, on a float16 `h` and float32 `f` (4, 6)."""
    from ndlite.nn.attention import multi_head_attention_forward
    from ndlite.ops import selection
    from ndlite.ops.transformer import causal_softmax

    def mha(h, f):
        e = 6
        w, b = _t((3 * e, e), 3), _t((3 * e,), 4)
        q = h.reshape(4, 1, e)
        return multi_head_attention_forward(q, q, q, e, 2, w, b, None, None, False, 0.0,
                                            _t((e, e), 5), _t((e,), 6), need_weights=False)[0]

    labels = ndlite.tensor([0, 1, 2, 3])
    index = ndlite.tensor(np.arange(24).reshape(4, 6) % 4)
    return {
        "matmul": lambda h, f: f @ f.T, "mm": lambda h, f: ndlite.mm(h, f.T),
        "bmm": lambda h, f: ndlite.bmm(h[None], f.T[None]),
        "linear": lambda h, f: F.linear(h, f), "conv2d": lambda h, f: F.conv2d(
            h.reshape(1, 1, 4, 6), f[:2, :4].reshape(2, 1, 2, 2)),
        "conv1d": lambda h, f: F.conv1d(h[None], f[:, :3].reshape(1, 4, 3)),
        "conv_transpose1d": lambda h, f: F.conv_transpose1d(h[None], f[:, :2].reshape(4, 1, 2)),
        "conv_transpose2d": lambda h, f: F.conv_transpose2d(
            h.reshape(1, 4, 2, 3), f.reshape(4, 1, 2, 3)),
        "lstm_cell": lambda h, f: ndlite.lstm_cell(h, (f[:, :2], f[:, :2]), _t((8, 6)),
                                                   _t((8, 2), 1))[0],
        "gru_cell": lambda h, f: ndlite.gru_cell(h, f[:, :2], _t((6, 6)), _t((6, 2), 1)),
        "rnn_tanh_cell": lambda h, f: ndlite.rnn_tanh_cell(h, f[:, :2], _t((2, 6)),
                                                           _t((2, 2), 1)),
        "rnn_relu_cell": lambda h, f: ndlite.rnn_relu_cell(h, f[:, :2], _t((2, 6)),
                                                           _t((2, 2), 1)),
        "scaled_dot_product_attention": lambda h, f: F.scaled_dot_product_attention(h, f, f),
        "multi_head_attention_forward": mha,
        "exp": lambda h, f: h.exp(), "expm1": lambda h, f: h.expm1(),
        "log": lambda h, f: h.abs().log(), "log10": lambda h, f: h.abs().log10(),
        "log2": lambda h, f: h.abs().log2(), "log1p": lambda h, f: h.abs().log1p(),
        "acos": lambda h, f: (h * 0.1).acos(), "asin": lambda h, f: (h * 0.1).asin(),
        "cosh": lambda h, f: h.cosh(), "sinh": lambda h, f: h.sinh(), "tan": lambda h, f: h.tan(),
        "pow": lambda h, f: h ** 2, "reciprocal": lambda h, f: h.reciprocal(),
        "rsqrt": lambda h, f: h.abs().rsqrt(), "softplus": lambda h, f: F.softplus(h),
        "softmax": lambda h, f: F.softmax(h, dim=1),
        "log_softmax": lambda h, f: F.log_softmax(h, dim=1),
        "causal_softmax": lambda h, f: causal_softmax(h),
        "logsumexp": lambda h, f: h.logsumexp(dim=1), "sum": lambda h, f: h.sum(),
        "prod": lambda h, f: h.prod(), "cumsum": lambda h, f: h.cumsum(dim=1),
        "cumprod": lambda h, f: h.cumprod(dim=1),
        "layer_norm": lambda h, f: F.layer_norm(h, (6,), f[0], f[1]),
        "group_norm": lambda h, f: F.group_norm(h, 2), "rms_norm": lambda h, f: F.rms_norm(h, (6,)),
        "vector_norm": lambda h, f: selection.vector_norm(h),
        "normalize": lambda h, f: F.normalize(h), "cosine_similarity": lambda h, f:
            F.cosine_similarity(h, h),
        "nll_loss": lambda h, f: F.nll_loss(h, labels),
        "cross_entropy": lambda h, f: F.cross_entropy(h, labels),
        "mse_loss": lambda h, f: F.mse_loss(h, h), "l1_loss": lambda h, f: F.l1_loss(h, h),
        "smooth_l1_loss": lambda h, f: F.smooth_l1_loss(h, h),
        "huber_loss": lambda h, f: F.huber_loss(h, h),
        "binary_cross_entropy": lambda h, f: F.binary_cross_entropy(h.sigmoid(), h.sigmoid()),
        "binary_cross_entropy_with_logits": lambda h, f: F.binary_cross_entropy_with_logits(
            h, h.sigmoid()),
        "atan2": lambda h, f: ndlite.atan2(h, f), "cat": lambda h, f: ndlite.cat([h, f]),
        "stack": lambda h, f: ndlite.stack([h, f]),
        "scatter_add": lambda h, f: selection.scatter_add(h, 0, index, f),
    }


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_every_op_of_the_policy_obeys_it(low):
    if low not in [str(d) for d in HALF]:
        pytest.skip("bfloat16 needs ml_dtypes")
    low = ndlite.dtypes.as_dtype(low)
    cases = _policy_cases()
    assert set(cases) == set(POLICY)  # a new entry of the table needs a case here
    h, f = _t((4, 6)).to(low), _t((4, 6), 1)
    want = {LOW: low, FP32: ndlite.float32, "promote": ndlite.float32}
    for name, call in cases.items():
        with ndlite.autocast(dtype=low):
            out = call(h, f)
        assert out.dtype == want[POLICY[name]], name


@pytest.mark.parametrize("name", ["ndlite.amp", "ndlite.amp.autocast_mode"])
def test_docstring_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted and result.failed == 0
