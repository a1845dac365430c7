"""The step fast paths (ndlite/device/step_fallbacks.py) on every backend: relu_grad and
add_scalar_inplace give their fallbacks' bits (signed zeros, NaN and infinities included),
and the layers that use them (ReLU's backward, BatchNorm's batch counter) stay right."""

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
