"""The OpenCL backend's fast paths for neural networks, beyond the conformance suite: conv2d and
its gradients on the seed CNN's shapes (split-K, both tile heights, groups, strides, dilation),
pooling indices and ties bit for bit, long-row log_softmax, and fused optimizer steps equal to
the core's fallbacks on the same device. References: the NumPy backend in float64."""

import numpy as np
import pytest

import ndlite
from ndlite.device import fallbacks
from ndlite.device.registry import probe

REF = ndlite.get_backend("numpy")
rng = np.random.default_rng(11)


@pytest.fixture(scope="module")
def b():
    found, why = probe("opencl")
    if found is None:
        pytest.skip(f"backend opencl unavailable: {why}")
    return found


def dtypes(b):
    return [np.float32] + ([np.float64] if np.dtype("float64") in b.dtypes else [])


def normal(*shape):
    return rng.standard_normal(shape)


def close(got, want, scale, dtype):
    """The contraction tolerance: |got - want| <= 8 eps S, S the same op on |inputs|."""
    bound = 8 * np.finfo(dtype).eps * scale + np.finfo(dtype).tiny
    assert np.all(np.abs(got - want) <= bound), float(np.max(np.abs(got - want) / bound))


# ---- convolution ------------------------------------------------------------------------------

CONV_CASES = [
    # the seed CNN's three layers at batch 4 (conv3's products are small enough to split k)
    ((4, 1, 28, 28), (32, 1, 5, 5), (1, 1), (0, 0), (1, 1), 1),
    ((4, 32, 12, 12), (64, 32, 5, 5), (1, 1), (0, 0), (1, 1), 1),
    ((4, 64, 4, 4), (128, 64, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    # groups, strides that skip input pixels, dilation, padding, non-square everything
    ((2, 6, 9, 7), (4, 3, 3, 2), (2, 3), (1, 2), (2, 1), 2),
    ((1, 3, 5, 11), (3, 1, 1, 3), (3, 1), (0, 1), (1, 3), 3),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[1])))
def test_conv2d_and_both_gradients_match_numpy(b, case):
    x_shape, w_shape, stride, padding, dilation, groups = case
    geometry = (stride, padding, dilation, groups)
    x, w = normal(*x_shape), normal(*w_shape)
    out = REF.conv2d(x, w, *geometry)
    g = normal(*out.shape)
    want = [out, REF.conv2d_grad_input(g, w, x_shape, *geometry),
            REF.conv2d_grad_weight(x, g, w_shape, *geometry)]
    scale = [REF.conv2d(abs(x), abs(w), *geometry),
             REF.conv2d_grad_input(abs(g), abs(w), x_shape, *geometry),
             REF.conv2d_grad_weight(abs(x), abs(g), w_shape, *geometry)]
    for dtype in dtypes(b):
        xd, wd, gd = (b.from_numpy(a.astype(dtype)) for a in (x, w, g))
        got = [b.conv2d(xd, wd, *geometry), b.conv2d_grad_input(gd, wd, x_shape, *geometry),
               b.conv2d_grad_weight(xd, gd, w_shape, *geometry)]
        for name, r, want_, s in zip(("forward", "grad_input", "grad_weight"), got, want, scale,
                                     strict=True):
            assert r.shape == want_.shape and r.dtype == dtype, name
            close(b.to_numpy(r), want_, s, dtype)


def test_conv2d_reads_strided_inputs_and_is_bitwise_repeatable(b):
    x = normal(3, 8, 10, 10).astype(np.float32)
    w = normal(16, 8, 3, 3).astype(np.float32)
    view = b.permute(b.from_numpy(x.transpose(1, 0, 2, 3).copy()), (1, 0, 2, 3))
    first = b.to_numpy(b.conv2d(view, b.from_numpy(w), (1, 1), (1, 1), (1, 1), 1))
    for _ in range(2):
        again = b.to_numpy(b.conv2d(view, b.from_numpy(w), (1, 1), (1, 1), (1, 1), 1))
        np.testing.assert_array_equal(again, first)
    close(first, REF.conv2d(x.astype(np.float64), w, (1, 1), (1, 1), (1, 1), 1),
          REF.conv2d(abs(x).astype(np.float64), abs(w), (1, 1), (1, 1), (1, 1), 1), np.float32)


def test_split_k_fills_the_device_with_long_enough_chunks(b, monkeypatch):
    from ndlite_opencl import conv

    monkeypatch.setattr(b, "is_gpu", True)
    monkeypatch.setattr(b, "compute_units", 132)
    assert conv._splits(b, 1152, 25) == 1            # conv1 forward: plenty of tiles
    assert conv._splits(b, 1, 73728) == 264          # conv1 weight gradient: one tile
    assert conv._splits(b, 18, 512) == 512 // conv.MIN_CHUNK
    x, g = normal(2, 1, 28, 28), normal(2, 32, 24, 24)  # split into 264 chunks: still right
    got = b.conv2d_grad_weight(b.from_numpy(x), b.from_numpy(g), (32, 1, 5, 5), (1, 1), (0, 0),
                               (1, 1), 1)
    close(b.to_numpy(got), REF.conv2d_grad_weight(x, g, (32, 1, 5, 5), (1, 1), (0, 0), (1, 1), 1),
          REF.conv2d_grad_weight(abs(x), abs(g), (32, 1, 5, 5), (1, 1), (0, 0), (1, 1), 1),
          np.float64 if np.dtype("float64") in b.dtypes else np.float32)


STRIDED = [((3, 4, 9, 8), (5, 4, 3, 3), (2, 2), (1, 1), (1, 1)),    # ResNet's stride-2 3x3
           ((2, 6, 8, 8), (4, 6, 1, 1), (2, 2), (0, 0), (1, 1)),    # its 1x1 shortcut
           ((2, 3, 11, 10), (2, 3, 3, 2), (3, 2), (2, 1), (2, 3))]  # dilated, uneven


@pytest.mark.parametrize("case", STRIDED, ids=lambda c: "x".join(map(str, c[1])))
def test_a_strided_input_gradient_on_a_gpu_is_one_product_and_a_gather(b, case, monkeypatch):
    x_shape, w_shape, stride, padding, dilation = case
    geometry = (stride, padding, dilation, 1)
    from ndlite_opencl import conv

    monkeypatch.setattr(b, "is_gpu", True)  # the GPU path, on whatever device runs the tests
    taken = []
    strided = conv._strided_grad_input
    monkeypatch.setattr(conv, "_strided_grad_input",
                        lambda *a: taken.append(1) or strided(*a))
    w = normal(*w_shape)
    g = normal(*REF.conv2d(normal(*x_shape), w, *geometry).shape)
    want = fallbacks.conv2d_grad_input(REF, g, w, x_shape, *geometry)
    scale = REF.conv2d_grad_input(abs(g), abs(w), x_shape, *geometry)
    for dtype in dtypes(b):
        got = b.conv2d_grad_input(b.from_numpy(g.astype(dtype)), b.from_numpy(w.astype(dtype)),
                                  x_shape, *geometry)
        assert got.shape == x_shape and got.dtype == dtype
        close(b.to_numpy(got), want, scale, dtype)
        if dtype == np.float64:  # the fallback's order of sums: its bits
            np.testing.assert_array_equal(b.to_numpy(got), want)
    assert len(taken) == len(dtypes(b)), "one product and a gather, each time"
    monkeypatch.setattr(conv, "COLUMNS_MAX", 0)  # columns too large: the implicit GEMM
    g32, w32 = (b.from_numpy(a.astype(np.float32)) for a in (g, w))
    close(b.to_numpy(b.conv2d_grad_input(g32, w32, x_shape, *geometry)), want, scale, np.float32)


@pytest.mark.parametrize("tile", [(128, 64, 16, 8), (64, 128, 16, 8), (128, 128, 16, 8),
                                  (128, 128, 8, 8)])
def test_tiles_of_8_x_8_per_work_item_give_the_4_x_4_bits(b, tile, monkeypatch):
    from ndlite_opencl import conv

    x, w = normal(4, 32, 12, 12), normal(64, 32, 5, 5)
    g = normal(4, 64, 8, 8)
    geometry = ((1, 1), (0, 0), (1, 1), 1)
    monkeypatch.setattr(b, "compute_units", 1)  # no split-K: one order of sums for both

    def calls():
        b.__dict__.pop("_conv_plans", None)
        xd, wd, gd = (b.from_numpy(a.astype(np.float32)) for a in (x, w, g))
        return [b.to_numpy(r) for r in (b.conv2d(xd, wd, *geometry),
                                         b.conv2d_grad_input(gd, wd, x.shape, *geometry),
                                         b.conv2d_grad_weight(xd, gd, w.shape, *geometry))]

    monkeypatch.setattr(conv, "tile", lambda *_: (64, 64, 16, 4))
    fours = calls()
    monkeypatch.setattr(conv, "tile", lambda *_: tile)
    for four, eight in zip(fours, calls(), strict=True):
        np.testing.assert_array_equal(eight, four)
    b.__dict__.pop("_conv_plans", None)


# ---- pooling ----------------------------------------------------------------------------------

POOL_CASES = [((2, 2), (2, 2), (0, 0), (1, 1), False), ((3, 2), (2, 1), (1, 1), (1, 2), True),
              ((3, 3), (3, 2), (1, 0), (2, 1), True), ((1, 3), (1, 3), (0, 1), (1, 1), False)]


@pytest.mark.parametrize("geometry", POOL_CASES, ids=str)
def test_max_pool2d_values_indices_and_gradient_match_numpy(b, geometry):
    x = rng.integers(0, 4, (2, 3, 9, 8)).astype(np.float32)  # many ties: the first must win
    values, indices = REF.max_pool2d(x, *geometry)
    got_v, got_i = b.max_pool2d(b.from_numpy(x), *geometry)
    np.testing.assert_array_equal(b.to_numpy(got_v), values)
    np.testing.assert_array_equal(b.to_numpy(got_i), indices)
    g = normal(*values.shape).astype(np.float32)
    want = REF.max_pool2d_grad(g.astype(np.float64), indices, x.shape, *geometry)
    got = b.to_numpy(b.max_pool2d_grad(b.from_numpy(g), got_i, x.shape, *geometry))
    close(got, want, REF.max_pool2d_grad(abs(g).astype(np.float64), indices, x.shape, *geometry),
          np.float32)


@pytest.mark.parametrize("geometry", [g[:3] + g[4:] for g in POOL_CASES], ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_and_gradient_match_numpy(b, geometry, count_include_pad):
    x = normal(2, 3, 9, 8)
    args = (*geometry, count_include_pad)
    out = REF.avg_pool2d(x, *args)
    g = normal(*out.shape)
    for dtype in dtypes(b):
        got = b.to_numpy(b.avg_pool2d(b.from_numpy(x.astype(dtype)), *args))
        close(got, out, REF.avg_pool2d(abs(x), *args), dtype)
        got = b.to_numpy(b.avg_pool2d_grad(b.from_numpy(g.astype(dtype)), x.shape, *args))
        close(got, REF.avg_pool2d_grad(g, x.shape, *args),
              REF.avg_pool2d_grad(abs(g), x.shape, *args), dtype)


# ---- log_softmax ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,axis", [((128, 10), 1), ((3, 5000), 1), ((4, 700, 3), 1),
                                        ((6, 2, 3), 0)])
def test_log_softmax_matches_numpy_on_short_and_long_rows(b, shape, axis):
    x = 4 * normal(*shape)
    want = REF.log_softmax(x, axis)
    back = list(range(len(shape) - 1))
    back.insert(axis, len(shape) - 1)  # a strided view: the axis is innermost in memory
    for dtype in dtypes(b):
        view = b.permute(b.from_numpy(np.moveaxis(x, axis, -1).astype(dtype).copy()),
                         tuple(back))
        got = b.to_numpy(b.log_softmax(view, axis))
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ---- fused optimizer steps --------------------------------------------------------------------

STEPS = {
    "sgd": [dict(momentum=0.9, dampening=0.1, nesterov=False, weight_decay=0.01),
            dict(momentum=0.8, dampening=0.0, nesterov=True, weight_decay=0.0),
            dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.1)],
    "rmsprop": [dict(centered=True, momentum=0.5, weight_decay=0.1),
                dict(centered=False, momentum=0.0, weight_decay=0.0)],
    "adam": [dict(amsgrad=True, decoupled=False, weight_decay=0.1),
             dict(amsgrad=False, decoupled=True, weight_decay=0.01)],
}


def _step(impl, b, name, bufs, t, o):
    p, g = bufs["param"], bufs["grad"]
    if name == "sgd":
        impl.sgd_step(p, g, bufs.get("buf"), 0.05, o["momentum"], o["dampening"], o["nesterov"],
                      o["weight_decay"], t == 1)
    elif name == "rmsprop":
        impl.rmsprop_step(p, g, bufs["sq"], bufs.get("avg"), bufs.get("buf"), 0.01, 0.9, 1e-8,
                          o["momentum"], o["weight_decay"])
    else:
        impl.adam_step(p, g, bufs["m"], bufs["v"], bufs.get("vmax"), t, 0.01, 0.9, 0.99, 1e-8,
                       o["weight_decay"], o["decoupled"])


def _buffers(b, name, o, dtype):
    if name == "sgd":
        names = ["buf"] if o["momentum"] else []
    elif name == "rmsprop":
        names = ["sq"] + (["avg"] if o["centered"] else []) + (["buf"] if o["momentum"] else [])
    else:
        names = ["m", "v"] + (["vmax"] if o["amsgrad"] else [])
    p = np.random.default_rng(3).standard_normal((33, 7)).astype(dtype)
    bufs = {"param": b.from_numpy(p)}
    for n in names:
        bufs[n] = b.full(p.shape, 0, np.dtype(dtype))
    return bufs


@pytest.mark.parametrize("name,options", [(n, o) for n, os in STEPS.items() for o in os],
                         ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())))
def test_fused_steps_give_the_fallbacks_bits(b, name, options):
    class Fallback:
        def __getattr__(self, attr):
            return lambda *args: getattr(fallbacks, attr)(b, *args)

    for dtype in dtypes(b):
        fused, composed = (_buffers(b, name, options, dtype) for _ in range(2))
        for t in range(1, 4):
            grad = b.from_numpy(np.random.default_rng(t).standard_normal((33, 7)).astype(dtype))
            fused["grad"] = composed["grad"] = grad
            _step(b, b, name, fused, t, options)
            _step(Fallback(), b, name, composed, t, options)
        for key in composed:
            if key != "grad":
                np.testing.assert_array_max_ulp(b.to_numpy(fused[key]),
                                                b.to_numpy(composed[key]), maxulp=2)


def test_a_parameter_view_takes_the_fallback_and_still_updates_in_place(b):
    base = b.from_numpy(np.ones((4, 6), np.float32))
    view = b.slice(base, (slice(0, 4, 1), slice(0, 6, 2)))  # not contiguous
    b.sgd_step(view, b.from_numpy(np.full((4, 3), 2, np.float32)), None, 0.5, 0.0, 0.0, False,
               0.0, True)
    expect = np.ones((4, 6), np.float32)
    expect[:, ::2] = 0
    np.testing.assert_array_equal(b.to_numpy(base), expect)


# ---- nll_loss ---------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("n", [7, 1000])  # one group's items, and many rows per item
def test_nll_loss_and_gradient_match_the_fallback(b, reduction, n):
    labels = rng.integers(0, 10, n)
    labels[::3] = -100  # ignored rows: no loss, no gradient
    for dtype in dtypes(b):
        values = normal(n, 10).astype(dtype)
        logp = b.from_numpy(values)
        target = b.from_numpy(labels)
        got = b.to_numpy(b.nll_loss(logp, target, -100, reduction))
        want = b.to_numpy(fallbacks.nll_loss(b, logp, target, -100, reduction))
        assert got.shape == want.shape and got.dtype == dtype
        # sums in another order: within a few eps of the sum of magnitudes (a relative
        # bound fails where the terms cancel)
        scale = abs(b.to_numpy(fallbacks.nll_loss(b, b.from_numpy(abs(values)), target, -100,
                                                  reduction)))
        close(got, want, scale, dtype)
        g = b.from_numpy(normal(*want.shape).astype(dtype))
        got = b.to_numpy(b.nll_loss_grad(g, target, 10, -100, reduction))
        want = b.to_numpy(fallbacks.nll_loss_grad(b, g, target, 10, -100, reduction))
        np.testing.assert_array_equal(got, want)  # one product per element: the same bits
