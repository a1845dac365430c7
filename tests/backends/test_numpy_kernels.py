"""The NumPy backend's compiled kernels (kernels.py, optim.py; numba, optional) against its
pure NumPy path: convolution values and gradients, and optimizer steps bit for bit."""

import ndlite_numpy.kernels as kernels
import ndlite_numpy.nn as nn
import ndlite_numpy.optim as optim
import numpy as np
import pytest

from ndlite.device import fallbacks

pytestmark = pytest.mark.skipif(not kernels.enabled(),
                                reason=f"compiled kernels off: {kernels.status()}")

GEOMETRIES = [  # input, weight, stride, padding, dilation
    ((4, 3, 9, 9), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 4, 11, 9), (6, 4, 3, 2), (2, 1), (1, 2), (2, 1)),
    ((2, 2, 7, 8), (3, 2, 5, 5), (1, 2), (0, 3), (1, 1)),
    ((5, 6, 4, 4), (2, 6, 1, 1), (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["3x3-pad", "strided-dilated",
                                                      "wide-pad", "1x1"])
@pytest.mark.parametrize("threads", [1, 3])
def test_convolution_matches_the_numpy_path(geometry, threads, monkeypatch):
    xs, ws, stride, padding, dilation = geometry
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    out = kernels.conv2d(x, w, stride, padding, dilation, threads)
    grad_output = rng.standard_normal(out.shape)
    grad_w = kernels.conv2d_grad_weight(x, grad_output, ws, stride, padding, dilation, threads)
    grad_x = kernels.conv2d_grad_input(grad_output, w, xs, stride, padding, dilation, threads)
    monkeypatch.setattr(kernels, "MODE", "0")
    monkeypatch.setattr(kernels, "numba", None)  # nn.py's NumPy path from here
    np.testing.assert_allclose(out, nn.conv2d(x, w, stride, padding, dilation, 1), atol=1e-12)
    np.testing.assert_allclose(
        grad_w, nn.conv2d_grad_weight(x, grad_output, ws, stride, padding, dilation, 1),
        atol=1e-11)
    np.testing.assert_array_equal(  # col2im adds in the same order: exact
        grad_x, nn.conv2d_grad_input(grad_output, w, xs, stride, padding, dilation, 1))


def test_convolution_is_deterministic_per_thread_count():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((6, 3, 10, 10), dtype=np.float32), \
        rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    for threads in (1, 2, 4):
        runs = [kernels.conv2d_grad_input(kernels.conv2d(x, w, (1, 1), (1, 1), (1, 1), threads),
                                          w, x.shape, (1, 1), (1, 1), (1, 1), threads)
                for _ in range(3)]
        assert all(np.array_equal(runs[0], r) for r in runs[1:])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decay", [(0.0, False), (0.01, False), (0.01, True)],
                         ids=["plain", "l2", "adamw"])
def test_adam_step_is_the_reference_bit_for_bit(dtype, decay):
    rng = np.random.default_rng(0)
    state = [rng.standard_normal(optim.MIN_SIZE + 5).astype(dtype) for _ in range(4)]
    state[3] = np.abs(state[3])
    ours, reference = [a.copy() for a in state], [a.copy() for a in state]
    backend = pytest.importorskip("ndlite_numpy").NumpyBackend()
    for step in (1, 2, 3):
        assert optim.adam_step(*ours, None, step, 1e-3, 0.9, 0.999, 1e-8, *decay)
        fallbacks.adam_step(backend, *reference, None, step, 1e-3, 0.9, 0.999, 1e-8, *decay)
    for a, b in zip(ours, reference):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_step_is_the_reference_bit_for_bit(dtype, nesterov):
    rng = np.random.default_rng(0)
    state = [rng.standard_normal(optim.MIN_SIZE + 5).astype(dtype) for _ in range(3)]
    ours, reference = [a.copy() for a in state], [a.copy() for a in state]
    backend = pytest.importorskip("ndlite_numpy").NumpyBackend()
    for first in (True, False, False):
        assert optim.sgd_step(*ours, 0.01, 0.9, 0.1, nesterov, 1e-3, first)
        fallbacks.sgd_step(backend, *reference, 0.01, 0.9, 0.1, nesterov, 1e-3, first)
    for a, b in zip(ours, reference):
        np.testing.assert_array_equal(a, b)


def test_small_and_amsgrad_steps_are_left_to_the_reference():
    a = np.ones(10, dtype=np.float32)
    assert not optim.adam_step(a, a, a, a, None, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False)
    big = np.ones(optim.MIN_SIZE, dtype=np.float32)
    assert not optim.adam_step(big, big, big, big, big, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False)
