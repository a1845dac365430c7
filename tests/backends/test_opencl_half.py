"""float16 and bfloat16 on the OpenCL backend (stored in half, computed in float32), against
independent references: NumPy's own casts and float32 arithmetic rounded once (what the half
result must be, bit for bit, for + - * / sqrt and the casts), float64 sums, and the float32
kernels' results rounded once where the backend falls back to them."""

import numpy as np
import pytest

from ndlite.device.registry import probe
from ndlite.dtypes import HALF, finfo

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

F32 = np.dtype("float32")
rng = np.random.default_rng(16)


@pytest.fixture(scope="module")
def b():
    found, why = probe("opencl")
    if found is None:
        pytest.skip(f"backend opencl unavailable: {why}")
    return found


def bits(x):
    return np.asarray(x).view(np.uint16)


def draw(dtype, *shape, scale=1.0):
    """Values the half holds exactly (float32 draws rounded to it)."""
    return (rng.standard_normal(shape) * scale).astype(F32).astype(dtype)


def assert_bitwise(got, want):
    """Bitwise equal; any NaN equals any NaN (a GPU returns its canonical NaN where NumPy
    keeps the operand's payload: the contract's rule, tests/backends/bitwise.py)."""
    assert got.dtype == want.dtype
    nan = np.isnan(want.astype(F32))
    np.testing.assert_array_equal(np.isnan(got.astype(F32)), nan)
    np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan])


def special(dtype):
    """Signed zeros, infinities, a NaN, subnormals, the largest finite, ties of rounding."""
    tiny = np.finfo(np.float16).smallest_subnormal if dtype == np.float16 else np.float32(1e-40)
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -3 * tiny, 65504.0, 1e30,
                     1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8, 1e-8], F32)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_the_backend_lists_the_halves_and_moves_them_bitwise(b, dtype):
    assert dtype in b.dtypes
    x = special(dtype).astype(dtype)
    assert_bitwise(b.to_numpy(b.from_numpy(x)), x)
    view = b.slice(b.from_numpy(x), (slice(None, None, -2),))
    assert_bitwise(b.to_numpy(b.copy(view)), x[::-2])


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("source", ["float32", "float64", "int32", "int64", "bool"])
def test_casts_to_a_half_round_once_as_numpy(b, dtype, source):
    if source == "float64" and np.dtype(source) not in b.dtypes:
        pytest.skip("the device has no float64")
    if source in ("float32", "float64"):
        # near-ties: a float64 rounded first to float32 and then to the half lands on the
        # tie and rounds to even the wrong way; NumPy rounds a float16 once, ml_dtypes a
        # bfloat16 twice (as PyTorch): the backend does as the reference
        step = float(finfo(dtype).eps)
        x = np.concatenate([special(dtype).astype(source),
                            np.array([1 + step / 2 + 2.0**-40, 1 + 3 * step / 2 - 2.0**-40,
                                      -(1 + step / 2 + 2.0**-40)], source),
                            rng.standard_normal(200).astype(source) * 100])
    elif source == "bool":
        x = np.array([True, False, True])
    else:
        x = np.array([0, 1, -7, 2049, 4097, 65519, 65520, 2**20 + 1], source)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(dtype)
    assert_bitwise(b.to_numpy(b.astype(b.from_numpy(x), dtype)), want)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_casts_from_a_half_are_exact(b, dtype):
    x = special(dtype).astype(dtype)
    back = b.to_numpy(b.astype(b.from_numpy(x), F32))
    np.testing.assert_array_equal(back.view(np.uint32), x.astype(F32).view(np.uint32))
    other = HALF[0] if dtype != HALF[0] else HALF[-1]
    finite = draw(dtype, 50)
    with np.errstate(over="ignore"):
        want = finite.astype(F32).astype(other)
    assert_bitwise(b.to_numpy(b.astype(b.from_numpy(finite), other)), want)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arithmetic_is_float32_rounded_once(b, dtype, op):
    ufunc = getattr(np, {"sub": "subtract", "mul": "multiply", "div": "divide"}.get(op, op))
    x, y = draw(dtype, 4, 33, scale=50), draw(dtype, 33)
    y[::5] = special(dtype)[:7].astype(dtype)
    with np.errstate(all="ignore"):
        want = ufunc(x.astype(F32), y.astype(F32)).astype(dtype)
        assert_bitwise(b.to_numpy(getattr(b, op)(b.from_numpy(x), b.from_numpy(y))), want)
        # a Python number meets the half as float32, not rounded to the half first
        assert_bitwise(b.to_numpy(getattr(b, op)(b.from_numpy(x), 0.1)),
                       ufunc(x.astype(F32), np.float32(0.1)).astype(dtype))
        # strided, permuted operands
        xt = b.permute(b.from_numpy(x), (1, 0))
        got = b.to_numpy(getattr(b, op)(xt, b.reshape(b.from_numpy(y), (33, 1))))
        assert_bitwise(got, ufunc(x.T.astype(F32), y[:, None].astype(F32)).astype(dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_sqrt_comparisons_and_where_in_half(b, dtype):
    x = np.abs(draw(dtype, 300, scale=100))
    got = b.to_numpy(b.sqrt(b.from_numpy(x)))
    assert_bitwise(got, np.sqrt(x.astype(F32)).astype(dtype))
    y = draw(dtype, 300)
    cond = b.lt(b.from_numpy(x), b.from_numpy(y))
    np.testing.assert_array_equal(b.to_numpy(cond), x.astype(F32) < y.astype(F32))
    picked = b.to_numpy(b.where(cond, b.from_numpy(x), 0.3))
    assert_bitwise(picked, np.where(x.astype(F32) < y.astype(F32), x, np.float32(0.3)
                                    ).astype(F32).astype(dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_transcendental_ops_are_within_a_half_ulp_of_float64(b, dtype):
    x = draw(dtype, 500, scale=2)
    for name, ref in [("exp", np.exp), ("tanh", np.tanh), ("sigmoid",
                      lambda v: 1 / (1 + np.exp(-v)))]:
        got = b.to_numpy(getattr(b, name)(b.from_numpy(x))).astype(np.float64)
        want = ref(x.astype(np.float64))
        eps = float(finfo(dtype).eps)
        assert np.all(np.abs(got - want) <= eps * np.abs(want) + 1e-30), name
    got = b.to_numpy(b.math("sin", b.from_numpy(x)))
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), np.sin(x.astype(np.float64)),
                               rtol=float(finfo(dtype).eps), atol=float(finfo(dtype).eps))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_bfloat16_and_float16_roundings_on_their_ties(b, dtype):
    # float32 values exactly halfway between two halves: to the even one
    if dtype == np.float16:
        ties = np.array([1 + 2**-11, 1 + 3 * 2**-11, 2049.0, 2051.0, -2049.0], F32)
    else:
        ties = np.array([1 + 2**-8, 1 + 3 * 2**-8, 257.0, 259.0, -257.0], F32)
    got = b.to_numpy(b.astype(b.from_numpy(ties), dtype))
    assert_bitwise(got, ties.astype(dtype))
    nan = b.to_numpy(b.astype(b.from_numpy(np.array([np.nan, -np.nan], F32)), dtype))
    assert np.isnan(nan.astype(F32)).all()


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_sums_accumulate_in_float32_and_round_once(b, dtype):
    # 4096 ones: a half accumulator stops at 2048 (float16) or 256 (bfloat16)
    ones = np.ones((3, 4096), dtype)
    total = b.to_numpy(b.sum(b.from_numpy(ones), (1,), False))
    assert_bitwise(total, np.full(3, 4096, dtype))
    for shape, axes in [((5, 7, 300), (2,)), ((2, 100000), (1,)), ((40, 6, 5), (0, 2)),
                        ((3000,), (0,))]:
        x = draw(dtype, *shape)
        got = b.to_numpy(b.sum(b.from_numpy(x), axes, False))
        exact = x.astype(np.float64).sum(axis=axes)
        # float32 accumulation then one rounding: within half an ulp of the half, plus the
        # float32 sum's own few ulps
        bound = float(finfo(dtype).eps) / 2 * np.abs(exact) + 1e-5 * np.abs(x).astype(
            np.float64).sum(axis=axes)
        assert got.dtype == dtype
        assert np.all(np.abs(got.astype(np.float64) - exact) <= bound), (shape, axes)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_max_min_argmax_of_halves_are_exact(b, dtype):
    x = draw(dtype, 6, 333)
    x[2, 17] = np.nan
    for op, ref in [("max", np.max), ("min", np.min)]:
        got = b.to_numpy(getattr(b, op)(b.from_numpy(x), (1,), True))
        assert_bitwise(got, ref(x.astype(F32), axis=1, keepdims=True).astype(dtype))
    np.testing.assert_array_equal(b.to_numpy(b.argmax(b.from_numpy(x), 1, False)),
                                  np.argmax(x.astype(F32), axis=1))
    empty = b.to_numpy(b.sum(b.from_numpy(np.zeros((3, 0), dtype)), (1,), False))
    assert_bitwise(empty, np.zeros(3, dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_gather_put_and_fill_move_half_bits(b, dtype):
    x = special(dtype).astype(dtype).reshape(2, 7)
    index = np.array([[6, 0, 4], [1, 1, 5]])
    got = b.to_numpy(b.gather(b.from_numpy(x), b.from_numpy(index), 1))
    assert_bitwise(got, np.take_along_axis(x, index, 1))
    dst = b.from_numpy(np.zeros(6, dtype))
    b.put(dst, b.from_numpy(np.array([5, 1, 5])), b.from_numpy(x[0, :3]))
    want = np.zeros(6, dtype)
    want[[1, 5]] = x[0, [1, 2]]
    assert_bitwise(b.to_numpy(dst), want)
    b.put(dst, b.from_numpy(np.array([0])), b.from_numpy(np.float32([0.1])))  # rounded once
    assert_bitwise(b.to_numpy(dst)[:1], np.float32([0.1]).astype(dtype))
    with np.errstate(over="ignore"):
        assert_bitwise(b.to_numpy(b.full((4,), 1e6, dtype)), np.full(4, 1e6).astype(dtype))
    view = b.slice(b.full((3, 4), 0.0, dtype), (slice(None), slice(1, 3)))
    b.assign(view, 2.7)
    assert_bitwise(b.to_numpy(view), np.full((3, 2), 2.7).astype(F32).astype(dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_fallback_kernels_compute_in_float32_and_round_once(b, dtype):
    x, w = draw(dtype, 17, 40), draw(dtype, 40, 9)
    got = b.to_numpy(b.matmul(b.from_numpy(x), b.from_numpy(w)))
    wide = b.to_numpy(b.matmul(b.from_numpy(x.astype(F32)), b.from_numpy(w.astype(F32))))
    assert_bitwise(got, wide.astype(dtype))
    images, kernel = draw(dtype, 2, 3, 8, 8), draw(dtype, 4, 3, 3, 3)
    got = b.to_numpy(b.conv2d(b.from_numpy(images), b.from_numpy(kernel), (1, 1), (1, 1),
                              (1, 1), 1))
    wide = b.to_numpy(b.conv2d(b.from_numpy(images.astype(F32)),
                               b.from_numpy(kernel.astype(F32)), (1, 1), (1, 1), (1, 1), 1))
    assert_bitwise(got, wide.astype(dtype))
    assert b.matmul.__wrapped__ is not None and not hasattr(b.sum, "__wrapped__")


STEPS = {  # (number of buffers: param, grad, states; the hyperparameters)
    "sgd_step": (3, (1e-2, 0.9, 0.1, True, 0.01, False)),
    "rmsprop_step": (5, (1e-2, 0.99, 1e-8, 0.9, 0.01)),
    "adam_step": (5, (3, 1e-2, 0.9, 0.999, 1e-8, 0.01, True)),
}


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "strided"])
def test_optimizer_steps_compute_in_float32_and_store_rounded_once(b, dtype, name, fused):
    """Each buffer a step updates in place is the float32 step's result rounded once (fused:
    the half kernel; strided views: the core's fallback on float32 copies)."""
    count, hyper = STEPS[name]
    values = [draw(dtype, 50, 2)] + [draw(dtype, 50, 2, scale=0.1) for _ in range(count - 1)]
    values = values[:2] + [np.abs(v) for v in values[2:]]  # square averages are >= 0

    def buffers(cast):
        made = [b.from_numpy(v.astype(cast)) for v in values]
        return made if fused else [b.slice(x, (slice(None), slice(0, 1))) for x in made]

    half, wide = buffers(dtype), buffers(F32)
    getattr(b, name)(*half, *hyper)
    getattr(b, name)(*wide, *hyper)
    for h, w in zip(half, wide, strict=True):
        assert_bitwise(b.to_numpy(h), b.to_numpy(w).astype(dtype))
    assert not np.array_equal(bits(b.to_numpy(half[0])), bits(values[0][:, :1 + fused]))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape,axis", [((6, 40), 1), ((3, 5, 4), 1), ((2, 5000), 1), ((0, 3), 1)])
def test_log_softmax_of_halves_is_the_float32_kernel_rounded_once(b, dtype, shape, axis):
    x = draw(dtype, *shape, scale=3)
    got = b.to_numpy(b.log_softmax(b.from_numpy(x), axis))
    wide = b.to_numpy(b.log_softmax(b.from_numpy(x.astype(F32)), axis))
    assert_bitwise(got, wide.astype(dtype))
    assert "log_softmax" not in vars(b)  # the half kernel, not the float32 fallback


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_causal_softmax_and_dropout_of_halves_are_the_float32_kernels_rounded_once(b, dtype):
    x, grad = draw(dtype, 2, 5, 7, scale=3), draw(dtype, 2, 5, 7)
    out = b.causal_softmax(b.from_numpy(x), 0.5)
    wide = b.causal_softmax(b.from_numpy(x.astype(F32)), 0.5)
    assert_bitwise(b.to_numpy(out), b.to_numpy(wide).astype(dtype))
    got = b.causal_softmax_grad(b.from_numpy(grad), out, 0.5)
    want = b.causal_softmax_grad(b.from_numpy(grad.astype(F32)), b.astype(out, F32), 0.5)
    assert_bitwise(b.to_numpy(got), b.to_numpy(want).astype(dtype))
    mask = b.to_numpy(b.dropout_mask((40, 3), 0.3, 11, dtype))
    assert_bitwise(mask, b.to_numpy(b.dropout_mask((40, 3), 0.3, 11, F32)).astype(dtype))
    for name in ("causal_softmax", "causal_softmax_grad", "dropout_mask"):
        assert name not in vars(b)  # the half kernels, not the float32 fallback


def test_the_float32_fallbacks_are_installed_at_the_first_half_buffer(b):
    fresh = type(b)(str(b.index))
    one = fresh.full((2, 2), 1.0, F32)
    fresh.matmul(one, one)
    assert "matmul" not in vars(fresh)  # a float32 program pays no dtype test
    mask = fresh.dropout_mask((2, 2), 0.5, 3, HALF[-1])  # a half made from a dtype argument
    assert "matmul" in vars(fresh) and "sum" not in vars(fresh)
    got = fresh.to_numpy(fresh.matmul(mask, fresh.astype(one, HALF[-1])))
    assert got.dtype == HALF[-1]


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_layer_norm_and_embedding_grad_of_halves_are_the_float32_kernels_rounded_once(b, dtype):
    x, w, bias, g = draw(dtype, 6, 10), draw(dtype, 10), draw(dtype, 10), draw(dtype, 6, 10)

    def run(cast):
        dev = [b.from_numpy(v.astype(cast)) for v in (x, w, bias, g)]
        y, mean, rstd = b.layer_norm(dev[0], dev[1], dev[2], 1e-5)
        grads = b.layer_norm_grad(dev[3], dev[0], dev[1], mean, rstd, True)
        rows = b.embedding_grad(dev[3], b.from_numpy(np.array([2, 0, 2, 1, 2, 0])), 4)
        return [b.to_numpy(v) for v in (y, mean, rstd, *grads, rows)]

    half, wide = run(dtype), run(F32)
    for i, (h, f) in enumerate(zip(half, wide, strict=True)):
        if i in (1, 2):  # mean and rstd stay float32, as PyTorch keeps them
            np.testing.assert_array_equal(h.view(np.uint32), f.view(np.uint32))
        else:
            assert_bitwise(h, f.astype(dtype))
    for name in ("layer_norm", "layer_norm_grad", "embedding_grad"):
        assert name not in vars(b)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_of_halves_is_the_float32_kernel_rounded_once(b, dtype, reduction):
    x, target = draw(dtype, 9, 5, scale=3), np.array([0, 4, -100, 2, 2, 1, 3, -100, 4])
    grad = draw(dtype, 9) if reduction == "none" else np.ones((), dtype) * 0.7

    def run(cast):
        labels = b.from_numpy(target)
        loss = b.nll_loss(b.from_numpy(x.astype(cast)), labels, -100, reduction)
        back = b.nll_loss_grad(b.from_numpy(np.asarray(grad).astype(cast)), labels, 5, -100,
                               reduction)
        return b.to_numpy(loss), b.to_numpy(back)

    for h, f in zip(run(dtype), run(F32), strict=True):
        assert_bitwise(h, f.astype(dtype))
    assert "nll_loss" not in vars(b) and "nll_loss_grad" not in vars(b)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_every_half_converts_and_random_float32_bits_round_as_numpy(b, dtype):
    every = np.arange(2**16, dtype=np.uint16).view(dtype)
    wide = b.to_numpy(b.astype(b.from_numpy(every), F32))
    want = every.astype(F32)
    same = (wide.view(np.uint32) == want.view(np.uint32)) | (np.isnan(wide) & np.isnan(want))
    assert same.all()
    patterns = np.random.default_rng(5).integers(0, 2**32, 2**20, dtype=np.uint64)
    x = patterns.astype(np.uint32).view(F32)
    x = x[~np.isnan(x)]  # NaN payloads: special() checks those that NumPy makes
    with np.errstate(over="ignore"):
        assert_bitwise(b.to_numpy(b.astype(b.from_numpy(x), dtype)), x.astype(dtype))
        small = (x / np.float32(2**100)).astype(F32)  # the half subnormals and their ties
        assert_bitwise(b.to_numpy(b.astype(b.from_numpy(small), dtype)), small.astype(dtype))
