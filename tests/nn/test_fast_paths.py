"""The optional fast paths of the device contract: the fallbacks (composed from primitives)
and the NumPy backend's overrides, both against the loop references in nn_reference.py, over
hypothesis-drawn geometry (stride, padding, dilation, groups, non-square, ceil_mode), with the
NumPy backend's batch cut into pieces for 1 and 3 threads."""

import contextlib

import ndlite_numpy.nn
import ndlite_numpy.threads
import nn_reference as ref
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ndlite.device import fallbacks, get_backend

B = get_backend("numpy")
DEFAULT_LAYOUT = ndlite_numpy.nn.WIDE_ROWS


class Direct:
    """The fallbacks bound to the NumPy backend's primitives (skipping its overrides)."""

    def __getattr__(self, name):
        return lambda *args: getattr(fallbacks, name)(B, *args)


IMPLEMENTATIONS = {"fallback": Direct(), "numpy": B}


@contextlib.contextmanager
def pieces(threads: int):
    """Every NumPy fast path splits its batch over `threads` threads, however small."""
    before = ndlite_numpy.threads.MIN_WORK
    ndlite_numpy.threads.MIN_WORK = 0
    try:
        with ndlite_numpy.threads.forced(threads):
            yield
    finally:
        ndlite_numpy.threads.MIN_WORK = before


@st.composite
def conv_geometry(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 7))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 7))
    n = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((n, groups * cg, h, w))
    weight = rng.standard_normal((groups * og, cg, kh, kw))
    return x, weight, dict(stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("layout", [0, 10**9], ids=["per-image", "batch-inner"])
@pytest.mark.parametrize("threads", [1, 3])
@given(case=conv_geometry())
def test_conv2d_forward_and_grads(impl, layout, threads, case):
    ndlite_numpy.nn.WIDE_ROWS = layout  # both NumPy layouts (restored below)
    try:
        with pieces(threads):
            _check_conv(impl, case)
    finally:
        ndlite_numpy.nn.WIDE_ROWS = DEFAULT_LAYOUT


def _check_conv(impl, case):
    x, weight, p = case
    b = IMPLEMENTATIONS[impl]
    args = (p["stride"], p["padding"], p["dilation"], p["groups"])
    expected = ref.conv2d(x, weight, **p)
    out = B.to_numpy(b.conv2d(x, weight, *args))
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
    grad = np.random.default_rng(1).standard_normal(expected.shape)
    gx, gw = ref.conv2d_grads(x, weight, grad, **p)
    np.testing.assert_allclose(b.conv2d_grad_input(grad, weight, x.shape, *args), gx,
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(b.conv2d_grad_weight(x, grad, weight.shape, *args), gw,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", [0, 10**9], ids=["per-image", "batch-inner"])
def test_conv2d_reused_buffers_keep_their_zero_border(layout):
    """Two geometries with one padded size (1 + 2*1 == 3 + 2*0): the second call's border must
    be zero, not the first call's image."""
    ndlite_numpy.nn.WIDE_ROWS = layout
    try:
        rng = np.random.default_rng(0)
        weight = rng.standard_normal((2, 2, 3, 3))
        B.conv2d(rng.standard_normal((2, 2, 1, 3)), weight, (1, 1), (1, 0), (1, 1), 1)
        x = rng.standard_normal((2, 2, 3, 1))
        got = B.conv2d(x, weight, (1, 1), (0, 1), (1, 1), 1)  # padded to 3x3 both times
        np.testing.assert_allclose(got, ref.conv2d(x, weight, stride=(1, 1), padding=(0, 1),
                                                   dilation=(1, 1), groups=1), rtol=1e-12)
    finally:
        ndlite_numpy.nn.WIDE_ROWS = DEFAULT_LAYOUT


@st.composite
def pool_geometry(draw, dilation=True):
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if draw(st.booleans()):  # windows that tile the input (the NumPy reshape fast path)
        (sh, sw), (dh, dw), (ph, pw) = (kh, kw), (1, 1), (0, 0)
    else:
        sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        dh, dw = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilation else (1, 1)
        ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    ceil_mode = draw(st.booleans())
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 7))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 7))
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 2)), h, w)
    for size, k, s, p, d in zip((h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw), strict=True):
        out = ref.out_size(size, k, s, p, d, ceil_mode)
        assume(not fallbacks.empty_windows(size, k, s, p, d, out))
    # a permuted grid with repeats: ties happen and must go to the first maximum
    seed = draw(st.integers(0, 2**16))
    x = np.random.default_rng(seed).integers(0, 5, size=shape).astype(np.float64)
    return x, dict(kernel_size=(kh, kw), stride=(sh, sw), padding=(ph, pw),
                   dilation=(dh, dw), ceil_mode=ceil_mode)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("threads", [1, 3])
@given(case=pool_geometry())
def test_max_pool2d_values_indices_and_grad(impl, threads, case):
    with pieces(threads):
        _check_max_pool(impl, case)


def _check_max_pool(impl, case):
    x, p = case
    b = IMPLEMENTATIONS[impl]
    k, s, pad, d, ceil = (p["kernel_size"], p["stride"], p["padding"], p["dilation"],
                          p["ceil_mode"])
    values, indices = ref.max_pool2d(x, k, s, pad, d, ceil)
    out, idx = b.max_pool2d(x, k, s, pad, d, ceil)
    np.testing.assert_array_equal(out, values)
    np.testing.assert_array_equal(idx, indices)
    assert idx.dtype == np.int64
    grad = np.random.default_rng(2).standard_normal(values.shape)
    expected = np.zeros(x.size)
    planes = x.shape[2] * x.shape[3]
    flat = (np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2] + (1, 1)) * planes
            + indices)
    np.add.at(expected, flat.reshape(-1), grad.reshape(-1))
    got = b.max_pool2d_grad(grad, idx, x.shape, k, s, pad, d, ceil)
    np.testing.assert_allclose(got, expected.reshape(x.shape), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@given(case=pool_geometry(dilation=False), count_include_pad=st.booleans())
def test_avg_pool2d_and_grad(impl, case, count_include_pad):
    x, p = case
    b = IMPLEMENTATIONS[impl]
    k, s, pad, ceil = p["kernel_size"], p["stride"], p["padding"], p["ceil_mode"]
    expected = ref.avg_pool2d(x, k, s, pad, ceil, count_include_pad)
    out = b.avg_pool2d(x, k, s, pad, ceil, count_include_pad)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    # the gradient is the adjoint: <avg(x), g> = <x, avg_grad(g)> for every x and g
    grad = np.random.default_rng(3).standard_normal(expected.shape)
    gx = b.avg_pool2d_grad(grad, x.shape, k, s, pad, ceil, count_include_pad)
    probe = np.random.default_rng(4).standard_normal(x.shape)
    lhs = np.sum(ref.avg_pool2d(probe, k, s, pad, ceil, count_include_pad) * grad)
    np.testing.assert_allclose(np.sum(probe * gx), lhs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("axis", [0, 1])
def test_log_softmax(impl, axis):
    x = np.random.default_rng(5).standard_normal((4, 5)) * 30
    out = IMPLEMENTATIONS[impl].log_softmax(x, axis)
    shifted = x - x.max(axis, keepdims=True)
    np.testing.assert_allclose(out, shifted - np.log(np.exp(shifted).sum(axis, keepdims=True)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_numpy_where_fast_path_is_bitwise_np_where(dtype, layout):
    """The NumPy backend selects large operands by bit masks (branch-free); it must agree
    with np.where bit for bit, -0.0, infinities and NaN included, for scalar branches too."""
    rng = np.random.default_rng(0)
    cond = rng.random((80, 70)) > 0.5
    a = (rng.standard_normal((80, 70)) * 10).astype(dtype)
    b = (rng.standard_normal((80, 70)) * 10).astype(dtype)
    floating = np.dtype(dtype).kind == "f"
    if floating:
        a[0, :5] = [np.nan, -0.0, np.inf, -np.inf, 0.0]
        cond[0, :5] = True
    if layout == "transposed":
        cond, a, b = cond.T, a.T, b.T
    zero, other = (0.0, -2.5) if floating else (0, -2)
    for x, y in [(a, b), (a, zero), (a, other), (other, b), (zero, b)]:
        got = np.ascontiguousarray(B.where(cond, x, y))
        expected = np.ascontiguousarray(np.where(cond, x, y).astype(dtype))
        assert got.dtype == np.dtype(dtype)
        assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("kernel,stride,padding,dilation", [
    ((2, 2), (2, 2), (1, 1), (1, 1)), ((3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 2), (2, 1), (1, 1), (2, 1)), ((2, 3), (1, 2), (0, 1), (1, 1)),
])
def test_max_pool2d_padding_never_wins_even_against_minus_infinity(impl, kernel, stride,
                                                                    padding, dilation):
    """An all -inf window picks its first element inside the plane (row-major), never a
    padding tap, whose position would point outside the plane or at another element."""
    x = np.full((1, 1, 4, 5), -np.inf, np.float32)
    values, indices = IMPLEMENTATIONS[impl].max_pool2d(x, kernel, stride, padding, dilation,
                                                       False)
    h, w = x.shape[2:]
    for i in range(indices.shape[2]):
        for j in range(indices.shape[3]):
            taps = [(i * stride[0] - padding[0] + p * dilation[0],
                     j * stride[1] - padding[1] + q * dilation[1])
                    for p in range(kernel[0]) for q in range(kernel[1])]
            r, c = next((r, c) for r, c in taps if 0 <= r < h and 0 <= c < w)
            assert indices[0, 0, i, j] == r * w + c
    assert np.all(values == -np.inf)
