"""The CuPy backend's own promises, against the NumPy backend as the reference: device
selection, transfers, NumPy's bitwise rules for selection ops, float32 matmul without TF32,
the out-of-memory rule and kernel build errors (gather, scatter_add, put and reductions:
test_cupy_indexing.py). (Every op's values and gradients are checked by the conformance
suite, which runs on every backend.)

Skipped, saying why, where CuPy or a CUDA device is missing (CI has no GPU).
"""

import numpy as np
import pytest

from ndlite.device.registry import probe

BACKEND, WHY = probe("cupy")
if BACKEND is None:
    pytest.skip(f"backend cupy unavailable: {WHY}", allow_module_level=True)

import cupy  # noqa: E402
from bitwise import assert_same_bits, bits, rng  # noqa: E402
from cupy._core import _routines_linalg  # noqa: E402
from ndlite_cupy import CupyBackend  # noqa: E402
from ndlite_cupy.kernels import elementwise  # noqa: E402

import ndlite  # noqa: E402
from ndlite.device import (  # noqa: E402
    BackendUnavailableError,
    KernelBuildError,
    OutOfMemoryError,
    get_backend,
)

b = BACKEND
ref = get_backend("numpy")
DEVICES = cupy.cuda.runtime.getDeviceCount()
FLOATS = ["float32", "float64"]
ALL_DTYPES = ["float32", "float64", "int32", "int64", "bool"]


def on_gpu(a):
    return b.from_numpy(np.asarray(a))


def host(x):
    return b.to_numpy(x)


# ---- device selection and identity ----------------------------------------------------------


def test_names_its_device_and_reports_versions():
    assert b.kind == "cupy"
    assert b.name == f"cupy:{cupy.cuda.runtime.getDevice()}"
    assert get_backend("cupy") is b and get_backend(b.name) is b
    info = b.info()
    for key in ("device", "compute_capability", "memory", "cuda_runtime", "cuda_driver",
                "cupy", "tf32", "devices"):
        assert info[key], key
    assert info["device"] == b.device_name() != ""
    assert info["cupy"] == cupy.__version__
    assert len(info["devices"]) == DEVICES


def test_devices_that_do_not_exist_are_unavailable_with_the_reason():
    with pytest.raises(BackendUnavailableError, match=f"{DEVICES} CUDA device"):
        CupyBackend(str(DEVICES))
    with pytest.raises(BackendUnavailableError, match="not a device number"):
        CupyBackend("gpu")


def test_switching_to_the_device_gives_the_same_results():
    # the path a second GPU takes (every primitive wrapped in `with Device`), on this one
    switching = CupyBackend(str(b._device.id), switch_device=True)
    x_host = rng().standard_normal((6, 5)).astype(np.float32)
    x = switching.from_numpy(x_host)
    assert x.device.id == b._device.id
    y = switching.sum(switching.matmul(x, switching.permute(x, (1, 0))), (1,), False)
    np.testing.assert_allclose(switching.to_numpy(y), (x_host @ x_host.T).sum(1), rtol=1e-5)
    index = switching.from_numpy(np.array([[0], [2], [2], [1], [0], [2]]))
    np.testing.assert_array_equal(switching.to_numpy(switching.scatter_add(index, x, 0, 3)),
                                  ref.scatter_add(np.array([[0], [2], [2], [1], [0], [2]]),
                                                  x_host, 0, 3))


@pytest.mark.skipif(DEVICES < 2, reason=f"needs 2 CUDA devices, this machine has {DEVICES}")
def test_a_second_device_runs_its_own_ops():
    current = cupy.cuda.runtime.getDevice()
    other_index = 1 if current == 0 else 0
    other = get_backend(f"cupy:{other_index}")
    assert other.name == f"cupy:{other_index}" and other.switch_device
    x = other.from_numpy(np.ones((4, 4), np.float32))
    y = other.matmul(other.add(x, 1.0), x)
    assert x.device.id == other_index and y.device.id == other_index
    np.testing.assert_array_equal(other.to_numpy(y), np.full((4, 4), 8.0, np.float32))
    assert cupy.cuda.runtime.getDevice() == current


# ---- transfers and dtypes -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_transfers_copy_both_ways_and_keep_the_dtype(dtype):
    source = (rng().standard_normal((3, 4)) * 10).astype(dtype)
    expected = source.copy()
    x = b.from_numpy(source)
    source[...] = 0  # the device buffer is a copy
    back = b.to_numpy(x)
    assert x.dtype is np.dtype(dtype)  # the core compares dtypes by identity
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, expected)
    back[...] = 1  # so is the host array
    np.testing.assert_array_equal(b.to_numpy(x), expected)
    scalar = b.to_numpy(b.from_numpy(np.array(expected[0, 0])))
    assert scalar.shape == () and scalar == expected[0, 0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_transfers_fills_and_pads_keep_negative_zero(dtype):
    for shape in ((), (3,), (2, 2)):
        zeros = np.full(shape, -0.0, dtype)
        np.testing.assert_array_equal(bits(host(b.from_numpy(zeros))), bits(zeros))
        np.testing.assert_array_equal(bits(host(b.full(shape, -0.0, np.dtype(dtype)))),
                                      bits(zeros))
        np.testing.assert_array_equal(bits(host(b.full(shape, 0.0, np.dtype(dtype)))),
                                      bits(np.zeros(shape, dtype)))
    padded = host(b.pad(on_gpu(np.ones(2, dtype)), ((1, 2),), -0.0))
    np.testing.assert_array_equal(bits(padded), bits(ref.pad(np.ones(2, dtype), ((1, 2),), -0.0)))


@pytest.mark.parametrize("shape", [(), (2, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_python_scalars_take_the_buffer_dtype(dtype, shape):
    # 0-d arrays too: CuPy's own ufuncs would widen float32 * 0.1 to float64 there
    floating = np.dtype(dtype).kind == "f"
    h = (np.arange(1, 1 + int(np.prod(shape))).reshape(shape) + (0.3 if floating else 0))
    h = h.astype(dtype)
    x = on_gpu(h)
    ops = ["add", "sub", "mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "pow"]
    if floating:
        ops.append("div")
    for op in ops:
        for scalar in ((0.1, 2.0, -1.0) if floating else (3, 2, 0)):
            for args in ((x, scalar), (scalar, x)):
                host_args = tuple(h if a is x else a for a in args)
                got, want = host(getattr(b, op)(*args)), getattr(ref, op)(*host_args)
                assert got.dtype == want.dtype, (op, args)
                if op == "pow" and floating:  # CUDA's pow is within a few ulps of libm's
                    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{op} {args}")
                else:
                    np.testing.assert_array_equal(got, want, err_msg=f"{op} {args}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_is_exact_for_the_exponents_gradients_use(dtype):
    # gradients compute x ** (n - 1) for small n; CUDA's pow(x, 1.0) can be an ulp off x
    h = rng().uniform(0.25, 2.0, 1000).astype(dtype)
    for exponent, exact in ((1.0, h), (0.0, np.ones_like(h)), (2.0, h * h), (-1.0, 1 / h)):
        for e in (exponent, on_gpu(np.full_like(h, exponent))):
            got = host(b.pow(on_gpu(h), e))
            np.testing.assert_array_equal(bits(got), bits(exact), err_msg=f"x ** {exponent}")
            np.testing.assert_allclose(got, ref.pow(h, exponent), rtol=np.finfo(dtype).eps)


def test_integer_pow_wraps_like_numpy():
    h = np.array([0, 1, -1, 2, -3, 7, 1000, 46341], np.int32)
    for exponent in (0, 1, 2, 3, 5):
        np.testing.assert_array_equal(host(b.pow(on_gpu(h), exponent)), ref.pow(h, exponent))
    big = h.astype(np.int64) * 100003
    np.testing.assert_array_equal(host(b.pow(on_gpu(big), 4)), ref.pow(big, 4))


# ---- selection ops: NumPy's bits ------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_maximum_minimum_relu_match_numpy_bitwise(dtype):
    special = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, 1.0, -1.0, 2.0], dtype)
    left, right = np.repeat(special, special.size), np.tile(special, special.size)
    for op in ("maximum", "minimum"):
        got = host(getattr(b, op)(on_gpu(left), on_gpu(right)))
        assert_same_bits(got, getattr(np, op)(left, right), op)
        for zero in (0.0, -0.0):
            got = host(getattr(b, op)(on_gpu(left), zero))
            want = getattr(np, op)(left, np.dtype(dtype).type(zero))
            assert_same_bits(got, want, f"{op} {zero}")
    assert_same_bits(host(b.relu(on_gpu(left))), ref.relu(left), "relu")


@pytest.mark.parametrize("dtype", FLOATS)
def test_sigmoid_is_accurate_and_never_overflows(dtype):
    x = np.linspace(-80, 80, 4001).astype(dtype)
    got = host(b.sigmoid(on_gpu(x)))
    assert got.dtype == np.dtype(dtype)
    want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14, atol=0)
    extremes = host(b.sigmoid(on_gpu(np.array([-1e4, 1e4, -0.0], dtype))))
    np.testing.assert_array_equal(extremes, np.array([0.0, 1.0, 0.5], dtype))


# ---- matmul: full float32 precision ---------------------------------------------------------


def test_float32_matmul_does_not_use_tf32():
    assert _routines_linalg.get_compute_type(np.float32) == _routines_linalg.COMPUTE_TYPE_DEFAULT
    r = rng()
    a = r.standard_normal((512, 2048)).astype(np.float32)
    c = r.standard_normal((2048, 384)).astype(np.float32)
    got = host(b.matmul(on_gpu(a), on_gpu(c)))
    want = a.astype(np.float64) @ c.astype(np.float64)
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert error < 1e-5, f"relative error {error:.2e}: TF32 would give ~5e-4, float32 ~1e-7"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["c", "a transposed", "b transposed", "both", "a sliced",
                                    "empty k"])
def test_2d_products_recordable_in_a_graph_are_cupy_matmuls_bits(dtype, layout):
    """blas.matmul (cublasGemmEx through ctypes, what a CUDA graph records) passes
    cupy.matmul's arguments for every layout: the eager product's bits."""
    from ndlite_cupy import blas

    r = rng()

    def draw(*shape):
        return on_gpu(r.standard_normal(shape).astype(dtype))

    a_t, c_t = layout in ("a transposed", "both"), layout in ("b transposed", "both")
    a = draw(19, 37).T if a_t else draw(37, 40)[:, 3:22] if layout == "a sliced" else draw(37, 19)
    c = draw(23, 19).T if c_t else draw(19, 23)
    if layout == "empty k":
        a, c = a[:, :0], c[:0]
    want = cupy.matmul(a, c)
    assert_same_bits(host(b.matmul(a, c)), host(want))
    assert_same_bits(host(blas.matmul(a, c)), host(want))


def test_batched_matmul_broadcasts_batch_dims():
    r = rng()
    a = r.standard_normal((2, 1, 8, 5))
    c = r.standard_normal((3, 5, 4))
    np.testing.assert_allclose(host(b.matmul(on_gpu(a), on_gpu(c))), a @ c, rtol=1e-12)


@pytest.mark.parametrize("shape", [(64, 256, 384), (5, 3, 2, 7), (0, 4, 3), (4, 0, 3)])
def test_a_stack_of_matrices_times_a_matrix_is_one_product(shape):
    r = rng()
    a = r.standard_normal(shape).astype(np.float32)
    c = r.standard_normal((shape[-1], 33)).astype(np.float32)
    got = host(b.matmul(on_gpu(a), on_gpu(c)))
    want = a.astype(np.float64) @ c.astype(np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(shape[-1]))
    # a non-contiguous stack takes the batched path, with the same values
    t = on_gpu(np.ascontiguousarray(a.swapaxes(0, 1))).swapaxes(0, 1)
    np.testing.assert_allclose(host(b.matmul(t, on_gpu(c))), got, rtol=1e-5, atol=1e-5)


def _heads(r, dtype):
    """q, k^T and v of an attention layer: views of one (B, T, 3, H, hs) buffer."""
    qkv = on_gpu(r.standard_normal((2, 16, 3, 4, 8)).astype(dtype)).transpose(2, 0, 3, 1, 4)
    return qkv[0], qkv[1].swapaxes(-1, -2), qkv[2]


STRIDED = {  # name -> (a, b) on the GPU, neither both contiguous
    "q @ k^T": lambda r, t: _heads(r, t)[:2],
    "weights @ v": lambda r, t: (on_gpu(r.standard_normal((2, 4, 16, 16)).astype(t)),
                                 _heads(r, t)[2]),
    "columns of unit stride": lambda r, t: (
        on_gpu(r.standard_normal((3, 7, 5)).astype(t)).swapaxes(1, 2),
        on_gpu(r.standard_normal((3, 6, 7)).astype(t)).swapaxes(1, 2)),
    "rows wider than the matrix": lambda r, t: (
        on_gpu(r.standard_normal((4, 6, 9)).astype(t))[:, :, 2:7],
        on_gpu(r.standard_normal((4, 8, 3)).astype(t))[:, 1:6]),
    "broadcast batch": lambda r, t: (
        on_gpu(r.standard_normal((2, 1, 5, 8)).astype(t)).swapaxes(-1, -2),
        on_gpu(r.standard_normal((3, 5, 4)).astype(t))),
    "four batch dims": lambda r, t: (
        on_gpu(r.standard_normal((2, 3, 2, 2, 4, 5)).astype(t)).transpose(3, 1, 0, 2, 4, 5),
        on_gpu(r.standard_normal((2, 3, 2, 2, 5, 3)).astype(t)).transpose(3, 1, 0, 2, 4, 5)),
    "five batch dims (copied)": lambda r, t: (
        on_gpu(r.standard_normal((2, 1, 2, 1, 2, 3, 4)).astype(t)).swapaxes(0, 2),
        on_gpu(r.standard_normal((4, 2))).astype(t)[None]),
    "no unit stride (copied)": lambda r, t: (
        on_gpu(r.standard_normal((3, 8, 10)).astype(t))[:, ::2, ::2],
        on_gpu(r.standard_normal((3, 5, 2)).astype(t))),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", list(STRIDED), ids=str)
def test_batched_products_of_views_read_them_in_place(case, dtype, monkeypatch):
    from ndlite_cupy import blas

    a, c = STRIDED[case](rng(), dtype)
    assert a.ndim > 2 and not (a.flags.c_contiguous and c.flags.c_contiguous)
    strided = []
    original = blas.strided_matmul
    monkeypatch.setattr(blas, "strided_matmul",
                        lambda x, y: strided.append(original(x, y)) or strided[-1])
    got = b.matmul(a, c)
    want = host(a).astype(np.float64) @ host(c).astype(np.float64)
    assert got.shape == want.shape and got.dtype == a.dtype
    assert (strided[0] is None) == case.endswith("(copied)"), "read in place where it can"
    bound = (1e-5 if dtype == "float32" else 1e-13) * np.sqrt(a.shape[-1])
    np.testing.assert_allclose(host(got), want, rtol=bound, atol=bound)
    assert_same_bits(host(got), host(b.matmul(a, c)))  # the same bits run to run


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, axes", [((16384, 1536), (0,)), ((64, 256, 384), (0, 1)),
                                         ((300, 7), (0,)), ((256, 1), (0,)),
                                         ((100000, 3), (0,)), ((512, 2, 3), (0,)),
                                         # a conv bias gradient: every axis but 1
                                         ((128, 32, 24, 24), (0, 2, 3)), ((2, 3, 5), (0, 2)),
                                         ((4, 64, 7, 7), (3, 0, 2)), ((1, 1, 1, 1), (0, 2, 3)),
                                         ((3, 5, 2, 40000), (0, 2, 3)),
                                         # short trailing rows (softmax's backward)
                                         ((128, 10), (1,)), ((4, 3, 7), (1, 2)), ((5, 1), (1,)),
                                         ((3, 5000), (1,))])
def test_sums_over_leading_axes_are_accurate_and_repeat_bitwise(dtype, shape, axes):
    r = rng()
    x = (r.standard_normal(shape) * 10 + 3).astype(dtype)
    want = x.astype(np.float64).sum(axis=axes)
    for keepdims in (False, True):
        got = host(b.sum(on_gpu(x), axes, keepdims))
        assert got.dtype == np.dtype(dtype)
        assert got.shape == x.sum(axis=axes, keepdims=keepdims).shape
        # accumulated in float64 and rounded once: the float32 result is the rounded sum
        np.testing.assert_allclose(got.reshape(want.shape), want.astype(dtype),
                                   rtol=1e-6 if dtype == "float32" else 1e-12)
    first, again = (host(b.sum(on_gpu(x), axes, False)) for _ in range(2))
    assert_same_bits(again, first)


# ---- memory and kernels ---------------------------------------------------------------------


def test_out_of_memory_names_the_sizes_and_leaves_the_backend_working():
    free, total = b._device.mem_info
    requested = 2 * total // 512 * 512
    with pytest.raises(OutOfMemoryError) as caught:
        b.empty((requested // 4,), np.float32)
    message = str(caught.value)
    assert f"{requested:,} bytes" in message and "free" in message and "retrying" in message
    assert isinstance(caught.value, cupy.cuda.memory.OutOfMemoryError)  # CuPy's, too
    x = b.full((1024,), 1.0, np.float32)
    assert host(b.sum(x, (0,), False)) == 1024


def test_out_of_memory_frees_the_pool_cache_and_retries_once():
    pool = cupy.get_default_memory_pool()
    mib = 2**20
    with b._device:
        limit = pool.get_limit()
        pool.free_all_blocks()
        pool.set_limit(size=pool.total_bytes() + 96 * mib)
        try:
            cached = b.empty((40 * mib // 4,), np.float32)
            del cached  # back in the pool's cache, still counted against the limit
            # 40 MiB cached + 64 MiB > 96 MiB: CuPy refuses; ndlite frees the cache and retries
            x = b.empty((64 * mib // 4,), np.float32)
            assert x.nbytes == 64 * mib
            with pytest.raises(OutOfMemoryError, match="pool limit"):
                b.empty((128 * mib // 4,), np.float32)
        finally:
            pool.set_limit(size=limit)


def test_memory_in_use_counts_live_buffers():
    before = b.memory_in_use()
    x = b.empty((1 << 20,), np.float32)
    assert b.memory_in_use() >= before + x.nbytes
    del x


def test_a_kernel_that_fails_to_compile_raises_kernel_build_error_with_the_log():
    broken = elementwise("T x", "T y", "y = ndl_no_such_function(x)", "ndlite_test_broken")
    with pytest.raises(KernelBuildError) as caught:
        broken(on_gpu(np.ones(3, np.float32)))
    assert "ndl_no_such_function" in caught.value.log
    assert "ndlite_test_broken" in str(caught.value)


# ---- end to end through tensors -------------------------------------------------------------


def _loss_and_grads(backend, x, w1, w2, labels):
    with ndlite.using(backend):
        X = ndlite.tensor(x)
        W1 = ndlite.tensor(w1, requires_grad=True)
        W2 = ndlite.tensor(w2, requires_grad=True)
        logits = ndlite.matmul(ndlite.relu(ndlite.matmul(X, W1)), W2)
        picked = ndlite.gather(logits, 1, ndlite.tensor(labels.reshape(-1, 1)))
        loss = ndlite.mean(ndlite.logsumexp(logits, 1, keepdim=True) - picked)
        loss.backward()
        return loss.detach().numpy(), W1.grad.numpy(), W2.grad.numpy()


def test_a_small_network_trains_like_on_numpy():
    r = rng(3)
    x = r.standard_normal((16, 8))
    w1, w2 = r.standard_normal((8, 32)) / 3, r.standard_normal((32, 4)) / 6
    labels = r.integers(0, 4, 16)
    for got, want in zip(_loss_and_grads(b, x, w1, w2, labels),
                         _loss_and_grads("numpy", x, w1, w2, labels), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x_shape, out_features", [((64, 33), 17), ((4, 8, 32), 96),
                                                   ((1, 384), 1152)])
def test_linear_adds_the_bias_in_the_product_s_epilogue(x_shape, out_features, dtype):
    """Linear's forward through cuBLASLt's bias epilogue: within the contraction tolerance of
    float64 math, the same bits run to run, and an unaligned bias takes matmul + add."""
    from ndlite_cupy import lt

    r = rng()
    x = r.standard_normal(x_shape).astype(dtype)
    w = r.standard_normal((out_features, x_shape[-1])).astype(dtype)
    bias = r.standard_normal(out_features + 1).astype(dtype)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + bias[1:]
    scale = np.abs(x) @ np.abs(w.T) + np.abs(bias[1:])
    eps = np.finfo(dtype).eps * 4 * np.sqrt(x_shape[-1])
    aligned = on_gpu(bias[1:])  # a fresh buffer: aligned
    fused = lt.linear(on_gpu(x), on_gpu(w), aligned)
    assert fused is not None, "cuBLASLt's epilogue was not used"
    for got in (fused, b.linear(on_gpu(x), on_gpu(w), aligned),
                b.linear(on_gpu(x), on_gpu(w), on_gpu(bias)[1:])):  # unaligned: product + add
        assert got.shape == want.shape and got.dtype == np.dtype(dtype)
        assert (np.abs(host(got) - want) <= eps * scale).all()
    assert lt.linear(on_gpu(x), on_gpu(w), on_gpu(bias)[1:]) is None
    shifted = on_gpu(np.concatenate([x.ravel()[:1], x.ravel()]))[1:].reshape(x.shape)
    assert lt.linear(shifted, on_gpu(w), aligned) is None  # one element off a 256-byte line
    assert (np.abs(host(b.linear(shifted, on_gpu(w), aligned)) - want) <= eps * scale).all()
    assert_same_bits(host(fused), host(lt.linear(on_gpu(x), on_gpu(w), aligned)))
