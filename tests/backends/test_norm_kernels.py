"""The NumPy backend's fused batch-norm kernels (norm_kernels.py; numba, optional) against
float64 formulas written here and against norm.py's NumPy passes: forward and backward, with
and without weight and bias, float32 and float64, 3-D to 5-D inputs, non-contiguous input;
the same bits at 1, 2 and 3 threads and run to run; small inputs left to NumPy."""

import contextlib

import ndlite_numpy.kernels as kernels
import ndlite_numpy.norm as norm
import ndlite_numpy.norm_kernels as norm_kernels
import ndlite_numpy.threads as threads
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not kernels.enabled(),
                                reason=f"compiled kernels off: {kernels.status()}")
EPS = 1e-5


numpy_passes = kernels.disabled  # the pure NumPy passes (NDLITE_NUMBA=0) inside


@contextlib.contextmanager
def every_size():
    saved = norm_kernels.MIN_SIZE, norm_kernels.MIN_PLANE
    norm_kernels.MIN_SIZE = norm_kernels.MIN_PLANE = 1
    try:
        yield
    finally:
        norm_kernels.MIN_SIZE, norm_kernels.MIN_PLANE = saved


def reference(x, weight, bias, grad):
    """y and (grad_x, grad_weight, grad_bias) in float64, from the textbook formulas."""
    x, grad = x.astype(np.float64), grad.astype(np.float64)
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axes), x.var(axes)
    xhat = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + EPS)
    w = np.ones_like(mean) if weight is None else weight.astype(np.float64)
    y = xhat * w.reshape(shape) + (0 if bias is None else bias.astype(np.float64).reshape(shape))
    m = x.size // x.shape[1]
    sum_dy, sum_dy_xhat = grad.sum(axes), (grad * xhat).sum(axes)
    gx = (w / np.sqrt(var + EPS)).reshape(shape) * (
        grad - sum_dy.reshape(shape) / m - xhat * sum_dy_xhat.reshape(shape) / m)
    return (y, mean, 1 / np.sqrt(var + EPS), var), (gx, sum_dy_xhat, sum_dy)


def both(x, weight, bias, grad):
    forward = norm.batch_norm(None, x, weight, bias, EPS)
    backward = norm.batch_norm_grad(None, grad, x, weight, forward[1], forward[2],
                                    bias is not None)
    return forward, backward


CASES = [((32, 32, 32, 32), np.float32), ((8, 5, 9, 11), np.float32), ((6, 4, 70), np.float32),
         ((2, 3, 4, 5, 6), np.float64), ((3, 7, 13, 13), np.float64)]


@pytest.mark.parametrize("shape, dtype", CASES)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_against_float64_and_numpy_passes(shape, dtype, affine):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    grad = rng.standard_normal(shape).astype(dtype)
    c = shape[1]
    weight = rng.standard_normal(c).astype(dtype) if affine in ("both", "weight") else None
    bias = rng.standard_normal(c).astype(dtype) if affine in ("both", "bias") else None
    with every_size():
        got = both(x, weight, bias, grad)
    with numpy_passes():
        passes = both(x, weight, bias, grad)
    want = reference(x, weight, bias, grad)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for g_part, p_part, w_part in zip(got, passes, want, strict=True):
        for a, p, w in zip(g_part, p_part, w_part, strict=True):
            if p is None:
                assert a is None
                continue
            assert a.dtype == dtype and a.shape == p.shape
            scale = max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(a, w, rtol=tol, atol=tol * scale)
            np.testing.assert_allclose(a, p, rtol=tol, atol=tol * scale)


def test_same_bits_at_any_thread_count():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 24, 20, 20)).astype(np.float32)
    grad = rng.standard_normal(x.shape).astype(np.float32)
    weight, bias = rng.standard_normal(24).astype(np.float32), np.zeros(24, np.float32)
    runs = []
    for n in (1, 2, 3, 2):
        with threads.forced(n):
            forward, backward = both(x, weight, bias, grad)
        runs.append([*forward, *backward])
    for run in runs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(runs[0], run, strict=True))


def test_non_contiguous_input():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((20, 20, 8, 16)).astype(np.float32).transpose(2, 3, 0, 1)
    grad = rng.standard_normal(x.shape).astype(np.float32)
    with every_size():
        got = both(x, None, None, grad)
    want = reference(x, None, None, grad)
    np.testing.assert_allclose(got[0][0], want[0][0], atol=2e-5)
    np.testing.assert_allclose(got[1][0], want[1][0], atol=2e-5)


def test_small_inputs_stay_on_numpy():
    x3 = np.ones((2, 3, 100), np.float32)
    assert not norm_kernels.applies(x3)  # under MIN_SIZE
    assert not norm_kernels.applies(np.ones((4096, 32, 1), np.float32))  # planes of 1
    assert norm_kernels.applies(np.ones((32, 32, 1024), np.float32))
    assert not norm_kernels.applies(np.ones((32, 32, 1024), np.float16))
