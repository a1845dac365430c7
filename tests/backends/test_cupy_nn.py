"""The CuPy backend's neural-network fast paths (backends/ndlite_cupy/nn.py, optim.py) against
the NumPy reference backend: convolution and its gradients over strides, padding, dilation and
groups; pooling values, indices and gradients bit for bit; log_softmax; nll_loss; the fused
optimizer steps bit for bit over several steps; and determinism run to run.

Skipped, saying why, where CuPy or a CUDA device is missing (CI has no GPU).
"""

import numpy as np
import pytest

from ndlite.device.registry import probe

BACKEND, WHY = probe("cupy")
if BACKEND is None:
    pytest.skip(f"backend cupy unavailable: {WHY}", allow_module_level=True)

from ndlite.device import fallbacks, get_backend  # noqa: E402

b = BACKEND
ref = get_backend("numpy")
FLOATS = ["float32", "float64"]


def rng(seed=0):
    return np.random.default_rng(seed)


def on_gpu(a):
    return b.from_numpy(np.ascontiguousarray(a))


def host(x):
    return b.to_numpy(x)


def same_bits(actual, expected, what=""):
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg=what)
    ok = ~np.isnan(actual)
    assert np.array_equal(actual[ok].view(np.uint8), expected[ok].view(np.uint8)), what


def close_scaled(actual, expected, scale, dtype, what=""):
    """|actual - expected| <= 64 eps * scale, scale = the same op on absolute values."""
    eps = np.finfo(dtype).eps
    np.testing.assert_array_less(np.abs(actual - expected), 64 * eps * (scale + 1e-30),
                                 err_msg=what)


# ---- convolution ------------------------------------------------------------------------------

GEOMETRIES = [  # (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups
    ((4, 1, 28, 28), (32, 5, 5), (1, 1), (0, 0), (1, 1), 1),  # the seed CNN's layers
    ((4, 32, 12, 12), (64, 5, 5), (1, 1), (0, 0), (1, 1), 1),
    ((4, 64, 4, 4), (128, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 3, 9, 7), (4, 3, 2), (2, 3), (1, 2), (1, 1), 1),
    ((2, 4, 10, 11), (6, 3, 3), (1, 2), (2, 1), (2, 3), 2),
    ((1, 6, 5, 5), (6, 1, 1), (2, 2), (0, 0), (1, 1), 3),
    ((3, 2, 6, 6), (2, 4, 4), (3, 1), (3, 0), (1, 1), 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", GEOMETRIES, ids=str)
def test_conv2d_and_its_gradients_match_the_reference(case, dtype):
    (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups = case
    r = rng(1)
    x = r.standard_normal((n, c, h, w)).astype(dtype)
    weight = r.standard_normal((o, c // groups, kh, kw)).astype(dtype)
    geometry = (stride, padding, dilation, groups)
    out = host(b.conv2d(on_gpu(x), on_gpu(weight), *geometry))
    expected = ref.conv2d(x, weight, *geometry)
    close_scaled(out, expected, ref.conv2d(np.abs(x), np.abs(weight), *geometry), dtype)
    g = r.standard_normal(out.shape).astype(dtype)
    grad_x = host(b.conv2d_grad_input(on_gpu(g), on_gpu(weight), x.shape, *geometry))
    close_scaled(grad_x, ref.conv2d_grad_input(g, weight, x.shape, *geometry),
                 ref.conv2d_grad_input(np.abs(g), np.abs(weight), x.shape, *geometry), dtype)
    grad_w = host(b.conv2d_grad_weight(on_gpu(x), on_gpu(g), weight.shape, *geometry))
    close_scaled(grad_w, ref.conv2d_grad_weight(x, g, weight.shape, *geometry),
                 ref.conv2d_grad_weight(np.abs(x), np.abs(g), weight.shape, *geometry), dtype)


def test_conv2d_gradients_are_bitwise_deterministic():
    r = rng(2)
    x = on_gpu(r.standard_normal((16, 32, 12, 12)).astype(np.float32))
    weight = on_gpu(r.standard_normal((64, 32, 5, 5)).astype(np.float32))
    g = on_gpu(r.standard_normal((16, 64, 8, 8)).astype(np.float32))
    geometry = ((1, 1), (0, 0), (1, 1), 1)
    runs = [(host(b.conv2d_grad_input(g, weight, (16, 32, 12, 12), *geometry)),
             host(b.conv2d_grad_weight(x, g, (64, 32, 5, 5), *geometry))) for _ in range(3)]
    for grad_x, grad_w in runs[1:]:
        same_bits(grad_x, runs[0][0])
        same_bits(grad_w, runs[0][1])


# ---- pooling ----------------------------------------------------------------------------------

POOLS = [  # shape, kernel, stride, padding, dilation, ceil_mode
    ((4, 32, 24, 24), (2, 2), (2, 2), (0, 0), (1, 1), False),  # the seed CNN's
    ((2, 3, 7, 9), (3, 2), (2, 1), (1, 1), (1, 1), True),
    ((2, 2, 9, 8), (3, 3), (1, 2), (1, 0), (2, 1), False),
    ((1, 2, 5, 5), (2, 2), (2, 2), (1, 1), (1, 1), True),
    ((1, 1, 6, 6), (3, 3), (1, 1), (1, 1), (1, 1), False),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", POOLS, ids=str)
def test_max_pool_values_indices_and_gradient_match_the_reference_bitwise(case, dtype):
    shape, kernel, stride, padding, dilation, ceil_mode = case
    x = rng(3).integers(-3, 4, shape).astype(dtype)  # many ties: the first maximum must win
    args = (kernel, stride, padding, dilation, ceil_mode)
    values, indices = b.max_pool2d(on_gpu(x), *args)
    ref_values, ref_indices = ref.max_pool2d(x, *args)
    same_bits(host(values), ref_values)
    np.testing.assert_array_equal(host(indices), ref_indices)
    g = rng(4).standard_normal(ref_values.shape).astype(dtype)
    grad = b.max_pool2d_grad(on_gpu(g), indices, shape, *args)
    same_bits(host(grad), fallbacks.max_pool2d_grad(ref, g, ref_indices, shape, *args))


def test_max_pool_padding_never_wins_even_against_minus_infinity():
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    values, indices = b.max_pool2d(on_gpu(x), (3, 3), (2, 2), (1, 1), (1, 1), False)
    assert (host(values) == -np.inf).all()
    np.testing.assert_array_equal(host(indices), [[[[0, 1], [4, 5]]]])  # first input element


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("case", [c for c in POOLS if c[4] == (1, 1)], ids=str)
def test_avg_pool_and_its_gradient_match_the_reference_bitwise(case, count_include_pad, dtype):
    shape, kernel, stride, padding, _, ceil_mode = case
    x = rng(5).standard_normal(shape).astype(dtype)
    args = (kernel, stride, padding, ceil_mode, count_include_pad)
    out = host(b.avg_pool2d(on_gpu(x), *args))
    same_bits(out, ref.avg_pool2d(x, *args))
    g = rng(6).standard_normal(out.shape).astype(dtype)
    same_bits(host(b.avg_pool2d_grad(on_gpu(g), shape, *args)),
              ref.avg_pool2d_grad(g, shape, *args))


# ---- log_softmax and nll_loss -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, axis", [((128, 10), 1), ((3, 5, 7), 1), ((4, 3, 2), 0),
                                         ((2, 1000), 1), ((6,), 0)])
def test_log_softmax_matches_the_reference(shape, axis, dtype):
    x = (rng(7).standard_normal(shape) * 4).astype(dtype)
    np.testing.assert_allclose(host(b.log_softmax(on_gpu(x), axis)), ref.log_softmax(x, axis),
                               rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)


def test_log_softmax_propagates_nan_and_infinities_like_the_reference():
    x = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 0.0], [-np.inf] * 3, [0.0, 1.0, -np.inf]],
                 np.float32)
    np.testing.assert_allclose(host(b.log_softmax(on_gpu(x), 1)), ref.log_softmax(x, 1),
                               rtol=1e-6)  # NaN where NaN, -inf where -inf


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_nll_loss_and_its_gradient_match_the_reference(reduction, ignore_index, dtype):
    r = rng(8)
    x = r.standard_normal((300, 10)).astype(dtype)
    target = r.integers(0, 10, 300)
    target[::7] = ignore_index
    args = (ignore_index, reduction)
    np.testing.assert_allclose(host(b.nll_loss(on_gpu(x), on_gpu(target), *args)),
                               ref.nll_loss(x, target, *args), rtol=1e-5, atol=1e-6)
    g = r.standard_normal((300,) if reduction == "none" else ()).astype(dtype)
    grad = b.nll_loss_grad(on_gpu(g), on_gpu(target), 10, *args)
    same_bits(host(grad), ref.nll_loss_grad(g, target, 10, *args))


# ---- fused optimizer steps --------------------------------------------------------------------

OPTIMIZERS = {
    "sgd": lambda be, p, g, s, t: be.sgd_step(p, g, None, 0.1, 0.0, 0.0, False, 0.0, t == 1),
    "sgd_momentum": lambda be, p, g, s, t: be.sgd_step(p, g, s[0], 0.05, 0.9, 0.1, False, 1e-3,
                                                       t == 1),
    "sgd_nesterov": lambda be, p, g, s, t: be.sgd_step(p, g, s[0], 0.05, 0.9, 0.0, True, 0.0,
                                                       t == 1),
    "rmsprop": lambda be, p, g, s, t: be.rmsprop_step(p, g, s[0], None, None, 1e-2, 0.99, 1e-8,
                                                      0.0, 0.0),
    "rmsprop_centered": lambda be, p, g, s, t: be.rmsprop_step(p, g, s[0], s[1], s[2], 1e-2,
                                                               0.9, 1e-6, 0.5, 1e-2),
    "adam": lambda be, p, g, s, t: be.adam_step(p, g, s[0], s[1], None, t, 1e-3, 0.9, 0.999,
                                                1e-8, 0.0, False),
    "adam_l2": lambda be, p, g, s, t: be.adam_step(p, g, s[0], s[1], None, t, 1e-2, 0.8, 0.99,
                                                   1e-6, 0.1, False),
    "adamw_amsgrad": lambda be, p, g, s, t: be.adam_step(p, g, s[0], s[1], s[2], t, 1e-3, 0.9,
                                                         0.999, 1e-8, 1e-2, True),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_fused_optimizer_steps_equal_the_reference_bitwise(name, dtype):
    r = rng(9)
    p_host = r.standard_normal(1000).astype(dtype)
    grads = [r.standard_normal(1000).astype(dtype) for _ in range(4)]
    p_ref, s_ref = p_host.copy(), [np.zeros(1000, dtype) for _ in range(3)]
    p_gpu, s_gpu = on_gpu(p_host), [on_gpu(np.zeros(1000, dtype)) for _ in range(3)]
    for t, g in enumerate(grads, start=1):
        OPTIMIZERS[name](ref, p_ref, g, s_ref, t)
        OPTIMIZERS[name](b, p_gpu, on_gpu(g), s_gpu, t)
        same_bits(host(p_gpu), p_ref, f"{name} step {t}")
        for got, want in zip(s_gpu, s_ref, strict=True):
            same_bits(host(got), want, f"{name} state, step {t}")
