"""The step fast paths (ndlite/device/step_fallbacks.py) on every backend: relu_grad and
add_scalar_inplace give their fallbacks' bits (signed zeros, NaN and infinities included),
conv2d_bias and linear_grad theirs on random values (conv2d_bias's NaN, infinities and
signed zeros: the kit's test_layer_paths.py), log_softmax_grad agrees with float64; the
layers that use them (ReLU's backward, BatchNorm's batch counter, Conv2d, Linear, LogSoftmax)
make one call each."""

import numpy as np
import pytest

import ndlite
from ndlite.device import step_fallbacks as sfb


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _floats(b):
    return [d for d in ("float32", "float64", "float16") if np.dtype(d) in b.dtypes]


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(got)
    np.testing.assert_array_equal(nan, np.isnan(want))
    np.testing.assert_array_equal(_bits(got[~nan]), _bits(want[~nan]))


@pytest.mark.parametrize("shape", [(3, 5, 7), (1,), (0, 4), ()])
def test_relu_grad_is_where_out_positive_grad_else_zero(backend, shape):
    b = backend
    r = np.random.default_rng(0)
    for dtype in _floats(b):
        out = r.standard_normal(shape).astype(dtype)
        grad = r.standard_normal(shape).astype(dtype)
        if out.size >= 6:
            out.reshape(-1)[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30]
            grad.reshape(-1)[:6] = [-0.0, 2.0, 3.0, np.nan, 4.0, -0.0]
        o, g = b.from_numpy(out), b.from_numpy(grad)
        got = b.to_numpy(b.relu_grad(g, o))
        _same(got, b.to_numpy(sfb.relu_grad(b, g, o)))
        _same(got, np.where(out > 0, grad, np.zeros((), dtype)))


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "float64"])
def test_add_scalar_inplace_adds_in_place_keeping_the_dtype(backend, dtype):
    b = backend
    if np.dtype(dtype) not in b.dtypes:
        pytest.skip(f"{dtype} not on {b.name}")
    start = np.array([0, 7, -3, 2**20], dtype=dtype)
    x = b.from_numpy(start)
    b.add_scalar_inplace(x, 1)
    b.add_scalar_inplace(x, 2)
    got = b.to_numpy(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, start + 3)


def test_relu_backward_and_the_batch_norm_counter_use_them(backend):
    x = ndlite.tensor(np.linspace(-2, 2, 12).reshape(2, 2, 3), backend=backend,
                      requires_grad=True)
    ndlite.nn.functional.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (x.detach().numpy() > 0).astype(x.dtype))
    bn = ndlite.nn.BatchNorm2d(2).to(backend)
    for _ in range(3):
        bn(ndlite.tensor(np.ones((2, 2, 2, 2)), dtype=ndlite.float32, backend=backend))
    assert bn.num_batches_tracked.item() == 3 and bn.num_batches_tracked.dtype == np.int64


def test_relu_backward_with_a_gradient_of_another_dtype(backend):
    """backward(gradient=) in float64 on a float32 ReLU: the composed path promotes (the
    one-call relu_grad takes one dtype), as before."""
    if np.dtype("float64") not in backend.dtypes:
        pytest.skip(f"no float64 on {backend.name}")
    x = ndlite.tensor(np.linspace(-2, 2, 8), dtype=ndlite.float32, backend=backend,
                      requires_grad=True)
    g = np.linspace(1, 8, 8)
    ndlite.nn.functional.relu(x).backward(ndlite.tensor(g, backend=backend))
    np.testing.assert_allclose(x.grad.numpy(), np.where(x.detach().numpy() > 0, g, 0))


def _draw(b, r, shape, dtype):
    return b.from_numpy(r.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("geometry", [((1, 1), (0, 0), (1, 1), 1), ((2, 1), (1, 2), (1, 2), 2)])
def test_conv2d_bias_is_the_convolution_plus_its_bias(backend, geometry):
    b, r = backend, np.random.default_rng(1)
    for dtype in _floats(b):
        x, bias = _draw(b, r, (3, 4, 9, 8), dtype), _draw(b, r, (6,), dtype)
        weight = _draw(b, r, (6, 4 // geometry[3], 3, 2), dtype)
        got = b.to_numpy(b.conv2d_bias(x, weight, bias, *geometry))
        _same(got, b.to_numpy(sfb.conv2d_bias(b, x, weight, bias, *geometry)))
        plain = b.to_numpy(b.conv2d(x, weight, *geometry))
        _same(got, plain + b.to_numpy(bias).reshape(1, 6, 1, 1))
        relu = b.to_numpy(b.conv2d_bias(x, weight, bias, *geometry, True))
        _same(relu, b.to_numpy(sfb.conv2d_bias(b, x, weight, bias, *geometry, True)))
        _same(relu, np.where((got > 0) | np.isnan(got), got, np.zeros((), dtype)))


@pytest.mark.parametrize("lead", [(5,), (2, 3)])
def test_linear_grad_is_the_composed_backward(backend, lead):
    b, r = backend, np.random.default_rng(2)
    for dtype in _floats(b):
        grad, x = _draw(b, r, lead + (4,), dtype), _draw(b, r, lead + (7,), dtype)
        weight = _draw(b, r, (4, 7), dtype)
        for needs in [(True, True, True), (False, True, False), (True, False, True)]:
            got = b.linear_grad(grad, x, weight, needs)
            want = sfb.linear_grad(b, grad, x, weight, needs)
            for g, w in zip(got, want, strict=True):
                assert (g is None) == (w is None)
                if g is not None:
                    _same(b.to_numpy(g), b.to_numpy(w))
        g64, x64, w64 = (b.to_numpy(t).astype(np.float64) for t in (grad, x, weight))
        gx, gw, gb = (b.to_numpy(t) for t in b.linear_grad(grad, x, weight, (True,) * 3))
        tol = {"float16": 2e-2}.get(dtype, 1e-5)
        np.testing.assert_allclose(gx, g64 @ w64, rtol=tol, atol=tol)
        np.testing.assert_allclose(gw, g64.reshape(-1, 4).T @ x64.reshape(-1, 7), rtol=tol,
                                   atol=tol)
        np.testing.assert_allclose(gb, g64.reshape(-1, 4).sum(0), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape, axis", [((128, 10), 1), ((3, 5, 4), 1), ((6, 2), 0),
                                         ((2, 700), 1)])
def test_log_softmax_grad_is_grad_minus_softmax_times_the_row_sum(backend, shape, axis):
    b, r = backend, np.random.default_rng(3)
    for dtype in _floats(b):
        x = r.standard_normal(shape) * 3
        y64 = x - x.max(axis, keepdims=True)
        y64 -= np.log(np.exp(y64).sum(axis, keepdims=True))
        g64 = r.standard_normal(shape)
        y, g = b.from_numpy(y64.astype(dtype)), b.from_numpy(g64.astype(dtype))
        got = b.to_numpy(b.log_softmax_grad(g, y, axis))
        yd, gd = b.to_numpy(y).astype(np.float64), b.to_numpy(g).astype(np.float64)
        want = gd - np.exp(yd) * gd.sum(axis, keepdims=True)
        bound = np.abs(gd) + np.exp(yd) * np.abs(gd).sum(axis, keepdims=True)
        eps = float(np.finfo(dtype).eps)
        assert got.dtype == np.dtype(dtype) and got.shape == shape
        assert np.all(np.abs(got - want) <= 4 * eps * bound * (shape[axis] + 2)), dtype


def test_conv_linear_and_log_softmax_layers_make_one_call_each(backend):
    b = backend
    ndlite.manual_seed(0)
    model = ndlite.nn.Sequential(ndlite.nn.Conv2d(1, 3, 3), ndlite.nn.Flatten(),
                                 ndlite.nn.Linear(12, 5), ndlite.nn.LogSoftmax(dim=1)).to(b)
    x = ndlite.tensor(np.random.default_rng(4).standard_normal((2, 1, 4, 4)),
                      dtype=ndlite.float32, backend=b)
    calls = []
    names = ("conv2d_bias", "linear_grad", "log_softmax_grad")
    saved = {n: b.__dict__.get(n) for n in names}
    for n in names:
        method = getattr(b, n)
        setattr(b, n, lambda *a, _n=n, _m=method, **k: calls.append(_n) or _m(*a, **k))
    try:
        model(x).sum().backward()
    finally:
        for n, m in saved.items():
            if m is None:
                del b.__dict__[n]
            else:
                setattr(b, n, m)
    assert sorted(calls) == ["conv2d_bias", "linear_grad", "log_softmax_grad"], calls
