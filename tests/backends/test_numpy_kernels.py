"""The NumPy backend's compiled kernels (kernels.py, optim.py; numba, optional) against the
fallbacks composed from primitives and against its pure NumPy path: convolution values and
gradients (every geometry, groups, chunk and piece boundaries), max pooling and its gradient
bit for bit, and optimizer steps bit for bit."""

import contextlib

import ndlite_numpy.kernels as kernels
import ndlite_numpy.nn as nn
import ndlite_numpy.onednn as onednn
import ndlite_numpy.optim as optim
import ndlite_numpy.spread as spread
import ndlite_numpy.threads as threads_
import ndlite_numpy.winograd as winograd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndlite.device import fallbacks

pytestmark = pytest.mark.skipif(not kernels.enabled(),
                                reason=f"compiled kernels off: {kernels.status()}")

B = None  # the NumPy backend, made on first use


def backend():
    global B
    if B is None:
        B = pytest.importorskip("ndlite_numpy").NumpyBackend()
    return B


@contextlib.contextmanager
def split(threads: int, chunk_bytes: int, wide_pixels: int | None = None):
    """Every kernel cuts its batch into `threads` pieces however small, and convolution its
    pieces into chunks of chunk_bytes of columns (1: one image a chunk); wide_pixels: 0 for
    one product per image, a large number for one product per chunk."""
    before = (threads_.MIN_WORK, spread.MIN_ELEMENTS, spread.SPREAD_FROM,
              kernels.CHUNK_BYTES, kernels.WIDE_PIXELS)
    threads_.MIN_WORK, spread.MIN_ELEMENTS, spread.SPREAD_FROM = 0, 0, 1
    kernels.CHUNK_BYTES = chunk_bytes
    if wide_pixels is not None:
        kernels.WIDE_PIXELS = wide_pixels
    try:
        with threads_.forced(threads):
            yield
    finally:
        (threads_.MIN_WORK, spread.MIN_ELEMENTS, spread.SPREAD_FROM, kernels.CHUNK_BYTES,
         kernels.WIDE_PIXELS) = before


@pytest.fixture(autouse=True)
def numba_not_onednn():
    """These tests are the numba kernels' (against the NumPy path): oneDNN, which takes
    float32 convolutions first where installed, is off here (tests/backends/test_onednn.py)."""
    with onednn.disabled():
        yield


numpy_path = kernels.disabled  # nn.py's pure NumPy path (what runs without numba) inside


@st.composite
def conv_case(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))  # sw 1: the contiguous kernels
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 9))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((draw(st.integers(1, 5)), groups * cg, h, w))
    weight = rng.standard_normal((groups * og, cg, kh, kw))
    return x, weight, ((sh, sw), (ph, pw), (dh, dw), groups)


def _conv_all(x, weight, args):
    out = kernels.conv2d(x, weight, *args)
    grad = np.random.default_rng(1).standard_normal(out.shape).astype(x.dtype)
    return (out, kernels.conv2d_grad_input(grad, weight, x.shape, *args),
            kernels.conv2d_grad_weight(x, grad, weight.shape, *args)), grad


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("chunk_bytes", [1, 1 << 30], ids=["image-chunks", "one-chunk"])
@pytest.mark.parametrize("wide", [0, 1 << 30], ids=["per-image", "per-chunk"])
@settings(max_examples=30, deadline=None)
@given(case=conv_case())
def test_convolution_matches_the_fallbacks_and_the_numpy_path(threads, chunk_bytes, wide, case):
    """float64: the kernels against the fallbacks composed from primitives (an independent
    reference) and against nn.py's NumPy path, values and both gradients."""
    x, weight, args = case
    with split(threads, chunk_bytes, wide):
        ours, grad = _conv_all(x, weight, args)
        with numpy_path():
            numpy_path_results = (nn.conv2d(x, weight, *args),
                                  nn.conv2d_grad_input(grad, weight, x.shape, *args),
                                  nn.conv2d_grad_weight(x, grad, weight.shape, *args))
    b = backend()
    reference = (fallbacks.conv2d(b, x, weight, *args),
                 fallbacks.conv2d_grad_input(b, grad, weight, x.shape, *args),
                 fallbacks.conv2d_grad_weight(b, x, grad, weight.shape, *args))
    for got, want, other in zip(ours, reference, numpy_path_results, strict=True):
        assert got.dtype == np.float64 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(got, other, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("wide", [0, 1 << 30], ids=["per-image", "per-chunk"])
def test_float32_convolution_matches_the_numpy_path(stride, wide):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 8, 12, 12), dtype=np.float32)
    weight = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    args = ((stride, stride), (1, 1), (1, 1), 1)
    with split(2, 12000, wide):  # several chunks a piece, the last one short
        ours, grad = _conv_all(x, weight, args)
    with numpy_path():
        theirs = (nn.conv2d(x, weight, *args), nn.conv2d_grad_input(grad, weight, x.shape, *args),
                  nn.conv2d_grad_weight(x, grad, weight.shape, *args))
    for got, want in zip(ours, theirs, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_convolution_is_deterministic_per_thread_count():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 3, 10, 10), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    args = ((1, 1), (1, 1), (1, 1), 1)
    for threads in (1, 2, 4):
        with split(threads, 2048):
            runs = [_conv_all(x, w, args)[0] for _ in range(3)]
        for run in runs[1:]:
            for a, b in zip(runs[0], run, strict=True):
                np.testing.assert_array_equal(a, b)


@st.composite
def winograd_case(draw):
    """3x3, stride 1, padding 0-2, odd and even sizes (partial tiles at the edges)."""
    pad = draw(st.integers(0, 2))
    h, w = draw(st.integers(max(1, 3 - 2 * pad), 9)), draw(st.integers(max(1, 3 - 2 * pad), 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((draw(st.integers(1, 5)), draw(st.integers(1, 4)), h, w))
    weight = rng.standard_normal((draw(st.integers(1, 4)), x.shape[1], 3, 3))
    return x, weight, pad


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("chunk_bytes", [1, 1 << 30], ids=["image-chunks", "one-chunk"])
@settings(max_examples=40, deadline=None)
@given(case=winograd_case())
def test_winograd_matches_the_fallbacks(threads, chunk_bytes, case):
    """float64: Winograd's convolution and both gradients against the fallbacks."""
    x, weight, pad = case
    args = ((1, 1), (pad, pad), (1, 1), 1)
    b = backend()
    with split(threads, chunk_bytes):
        out = winograd.conv2d(x, weight, pad)
        grad = np.random.default_rng(1).standard_normal(out.shape)
        grad_x = winograd.conv2d_grad_input(grad, weight, pad)
        grad_w = winograd.conv2d_grad_weight(x, grad, pad)
    np.testing.assert_allclose(out, fallbacks.conv2d(b, x, weight, *args), rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(grad_x, fallbacks.conv2d_grad_input(b, grad, weight, x.shape, *args),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(grad_w,
                               fallbacks.conv2d_grad_weight(b, x, grad, weight.shape, *args),
                               rtol=1e-10, atol=1e-10)


def test_winograd_runs_where_it_applies_and_matches_the_numpy_path_in_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 16, 11, 10), dtype=np.float32)  # 11x10: partial tiles
    weight = rng.standard_normal((24, 16, 3, 3), dtype=np.float32)
    args = ((1, 1), (1, 1), (1, 1), 1)
    assert winograd.applies(x.shape, weight.shape, *args)
    assert not winograd.applies(x.shape, weight.shape, (2, 2), (1, 1), (1, 1), 1)
    assert not winograd.applies(x.shape, (24, 8, 3, 3), (1, 1), (1, 1), (1, 1), 2)
    assert not winograd.applies((5, 3, 11, 10), (24, 3, 3, 3), *args)  # too few channels
    assert not winograd.applies((5, 16, 4, 4), weight.shape, *args)  # planes too small
    with split(2, 30000):
        out = nn.conv2d(x, weight, *args)
        grad = rng.standard_normal(out.shape, dtype=np.float32)
        grad_x = nn.conv2d_grad_input(grad, weight, x.shape, *args)
        grad_w = nn.conv2d_grad_weight(x, grad, weight.shape, *args)
        runs = [(nn.conv2d(x, weight, *args), nn.conv2d_grad_weight(x, grad, weight.shape, *args))
                for _ in range(2)]
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)  # deterministic
    with numpy_path():
        wants = (nn.conv2d(x, weight, *args), nn.conv2d_grad_input(grad, weight, x.shape, *args),
                 nn.conv2d_grad_weight(x, grad, weight.shape, *args))
    # the transforms add a few roundings: float32 within ~1e-6 of the largest value
    for got, want in zip((out, grad_x, grad_w), wants, strict=True):
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@st.composite
def tiled_pool_case(draw):
    """Windows that tile the input (kernel == stride, no padding), 2x2 or other, with a
    remainder of rows or columns left out; values with ties, signed zeros and NaNs."""
    kh, kw = draw(st.sampled_from([(2, 2), (1, 1), (3, 3), (2, 3), (3, 1)]))
    h, w = kh * draw(st.integers(1, 4)) + draw(st.integers(0, kh - 1)), \
        kw * draw(st.integers(1, 4)) + draw(st.integers(0, kw - 1))
    shape = (draw(st.integers(1, 5)), draw(st.integers(1, 3)), h, w)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    choices = np.array([-1.0, -0.0, 0.0, 1.0, 2.0, np.nan, -np.inf])
    weights = np.array([3, 2, 2, 3, 3, draw(st.sampled_from([0, 1])), 1], dtype=float)
    x = rng.choice(choices, size=shape, p=weights / weights.sum())
    return x.astype(draw(st.sampled_from([np.float64, np.float32]))), (kh, kw)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("mode", ["pool", "numba"])  # threads.SPREAD
@settings(max_examples=60, deadline=None)
@given(case=tiled_pool_case())
def test_max_pool_matches_the_fallback_and_the_numpy_path_bit_for_bit(threads, mode, case):
    x, kernel = case
    args = (kernel, kernel, (0, 0), (1, 1), False)
    b = backend()
    before, spread.SPREAD = spread.SPREAD, mode
    with contextlib.ExitStack() as stack:
        stack.callback(setattr, spread, "SPREAD", before)
        stack.enter_context(split(threads, kernels.CHUNK_BYTES))
        values, indices = nn.max_pool2d(x, *args)
        grad = np.random.default_rng(2).standard_normal(values.shape).astype(x.dtype)
        got_grad = nn.max_pool2d_grad(grad, indices, x.shape, *args)
        with numpy_path():
            np_values, np_indices = nn.max_pool2d(x, *args)
            np_grad = nn.max_pool2d_grad(grad, indices, x.shape, *args)
    ref_values, ref_indices = fallbacks.max_pool2d(b, x, *args)
    # bits against the reference (and PyTorch): a tie of -0.0 and 0.0 keeps the first; the
    # NumPy path's np.maximum keeps 0.0 there, so against it values only
    np.testing.assert_array_equal(values.view(f"i{x.itemsize}"),
                                  ref_values.view(f"i{x.itemsize}"))
    np.testing.assert_array_equal(values, np_values)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(indices, np_indices)
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(got_grad, fallbacks.max_pool2d_grad(b, grad, indices, x.shape,
                                                                      *args))
    np.testing.assert_array_equal(got_grad, np_grad)


SIZES = pytest.mark.parametrize("size", [37, optim.MIN_SIZE + 5], ids=["serial", "parallel"])


@SIZES
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decay", [(0.0, False), (0.01, False), (0.01, True)],
                         ids=["plain", "l2", "adamw"])
def test_adam_step_is_the_reference_bit_for_bit(dtype, decay, size):
    rng = np.random.default_rng(0)
    state = [rng.standard_normal(size).astype(dtype) for _ in range(4)]
    state[3] = np.abs(state[3])
    ours, reference = [a.copy() for a in state], [a.copy() for a in state]
    backend = pytest.importorskip("ndlite_numpy").NumpyBackend()
    for step in (1, 2, 3):
        assert optim.adam_step(*ours, None, step, 1e-3, 0.9, 0.999, 1e-8, *decay)
        fallbacks.adam_step(backend, *reference, None, step, 1e-3, 0.9, 0.999, 1e-8, *decay)
    for a, b in zip(ours, reference):
        np.testing.assert_array_equal(a, b)


@SIZES
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_step_is_the_reference_bit_for_bit(dtype, nesterov, size):
    rng = np.random.default_rng(0)
    state = [rng.standard_normal(size).astype(dtype) for _ in range(3)]
    ours, reference = [a.copy() for a in state], [a.copy() for a in state]
    backend = pytest.importorskip("ndlite_numpy").NumpyBackend()
    for first in (True, False, False):
        assert optim.sgd_step(*ours, 0.01, 0.9, 0.1, nesterov, 1e-3, first)
        fallbacks.sgd_step(backend, *reference, 0.01, 0.9, 0.1, nesterov, 1e-3, first)
    for a, b in zip(ours, reference):
        np.testing.assert_array_equal(a, b)


def test_amsgrad_and_other_dtypes_are_left_to_the_reference():
    big = np.ones(optim.MIN_SIZE, dtype=np.float32)
    assert not optim.adam_step(big, big, big, big, big, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False)
    half = np.ones(10, dtype=np.float16)
    assert not optim.adam_step(half, half, half, half, None, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0,
                               False)
