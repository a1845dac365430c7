"""Module forward hooks and pre-hooks (ndlite/nn/hooks.py) with PyTorch's semantics: what a
hook sees, what it may replace, their order, removal, always_call, and that a Sequential's
fused Conv2d + ReLU never hides a hooked layer."""

import warnings

import numpy as np
import pytest

import ndlite
from ndlite import nn


def _np(t):
    return t.detach().numpy()


def _x(backend, shape=(2, 1, 5, 5), seed=0):
    return ndlite.tensor(np.random.default_rng(seed).standard_normal(shape),
                         dtype=ndlite.float32, backend=backend)


def test_a_forward_hook_sees_each_layer_of_a_fused_pair(backend):
    ndlite.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()).to(backend)
    x = _x(backend)
    plain = _np(model(x))
    seen = {}
    model[0].register_forward_hook(lambda m, args, out: seen.update(conv=(args, out)))
    model[1].register_forward_pre_hook(lambda m, args: seen.update(relu_in=args[0]))
    out = model(x)
    args, conv = seen["conv"]
    assert args[0] is x and conv.shape == (2, 2, 3, 3)
    assert (_np(conv) < 0).any()  # before the ReLU
    assert seen["relu_in"] is conv
    np.testing.assert_array_equal(_np(out), plain)
    np.testing.assert_array_equal(_np(out), np.maximum(_np(conv), 0))


def test_hooks_may_replace_the_input_and_the_output_and_gradients_follow(backend):
    lin = nn.Linear(3, 2).to(backend)
    x = _x(backend, (4, 3)).requires_grad_()
    lin.register_forward_pre_hook(lambda m, args: args[0] * 2)  # one value: a one-tuple
    lin.register_forward_hook(lambda m, args, out: out * 3)
    out = lin(x)
    w, b = _np(lin.weight), _np(lin.bias)
    np.testing.assert_allclose(_np(out), 3 * (2 * x.detach().numpy() @ w.T + b), rtol=1e-5)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.tile(6 * w.sum(0), (4, 1)), rtol=1e-5)


def test_with_kwargs_hooks_see_and_replace_keyword_arguments(backend):
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m, x = Scale(), _x(backend, (3,))
    calls = []
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 5.0}),
                                with_kwargs=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(kwargs) or None,
                            with_kwargs=True)
    np.testing.assert_allclose(_np(m(x, factor=2.0)), 5 * _np(x))
    assert calls == [{"factor": 5.0}]
    m.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match="must return None or a tuple of"):
        m(x)


def test_order_prepend_remove_and_handles_as_context_managers():
    m, order = nn.Identity(), []
    first = m.register_forward_hook(lambda *a: order.append("first"))
    m.register_forward_hook(lambda *a: order.append("second"))
    m.register_forward_hook(lambda *a: order.append("zeroth"), prepend=True)
    m(ndlite.ones(1))
    assert order == ["zeroth", "first", "second"]
    first.remove()
    first.remove()  # twice is no error
    order.clear()
    with m.register_forward_pre_hook(lambda *a: order.append("pre")):
        m(ndlite.ones(1))
    m(ndlite.ones(1))
    assert order == ["pre", "zeroth", "second", "zeroth", "second"]
    with pytest.raises(TypeError, match="callable"):
        m.register_forward_hook("not a function")


def test_always_call_hooks_run_when_forward_raises_and_only_warn():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("forward failed")

    m, seen = Broken(), []
    m.register_forward_hook(lambda *a: seen.append("plain"))
    m.register_forward_hook(lambda mod, args, out: seen.append(("always", out)),
                            always_call=True)

    def loud(mod, args, out):
        raise KeyError("the hook failed too")

    m.register_forward_hook(loud, always_call=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="forward failed"):
            m(ndlite.ones(1))
    assert seen == [("always", None)]
    assert any("the hook failed too" in str(w.message) for w in caught)


def test_hooks_are_not_state():
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda *a: None)
    assert list(lin.state_dict()) == ["weight", "bias"]
    assert list(nn.Linear(2, 2).load_state_dict(lin.state_dict())) == [[], []]


def test_backward_hooks_see_and_replace_the_gradients(backend):
    # y = x W^T + b, loss = sum(y * c): grad_output = c, grad_input = c W (PyTorch's tuples)
    lin = nn.Linear(3, 2).to(backend)
    x = _x(backend, (4, 3)).requires_grad_()
    c = _x(backend, (4, 2), seed=1)
    seen = {}
    lin.register_full_backward_pre_hook(lambda m, go: seen.update(pre=go) or (go[0] * 2,))
    lin.register_full_backward_hook(lambda m, gi, go: seen.update(gi=gi, go=go) or
                                    (gi[0] * 0.5,))
    (lin(x) * c).sum().backward()
    w = _np(lin.weight)
    np.testing.assert_allclose(_np(seen["pre"][0]), _np(c), rtol=1e-6)
    np.testing.assert_allclose(_np(seen["go"][0]), 2 * _np(c), rtol=1e-6)
    np.testing.assert_allclose(_np(seen["gi"][0]), 2 * _np(c) @ w, rtol=1e-5)
    np.testing.assert_allclose(_np(x.grad), _np(c) @ w, rtol=1e-5)  # doubled, then halved
    np.testing.assert_allclose(_np(lin.weight.grad), 2 * _np(c).T @ _np(x), rtol=1e-5)


def test_backward_hooks_of_a_first_layer_and_their_limits():
    conv = nn.Conv2d(1, 2, 3)
    calls = []
    conv.register_full_backward_hook(lambda m, gi, go: calls.append((gi, go[0].shape)))
    relu_pair = nn.Sequential(conv, nn.ReLU())
    relu_pair(ndlite.ones(1, 1, 5, 5)).sum().backward()  # hooked: never fused
    assert calls == [((None,), (1, 2, 3, 3))]  # no input needs a gradient: gi is (None,)

    class Two(nn.Module):
        def forward(self, a, b):
            return a * b

    two = Two()
    two.register_full_backward_hook(lambda *args: None)
    with pytest.raises(NotImplementedError, match="2 tensor inputs"):
        two(ndlite.ones(2), ndlite.ones(2))
    with ndlite.no_grad():  # outside autograd a hooked module runs as it is
        assert two(ndlite.ones(2), ndlite.ones(2)).tolist() == [1.0, 1.0]
