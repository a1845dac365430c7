"""The OpenCL backend's own promises, beyond the conformance suite: device selection and its
errors, views that write through, the kernel cache, bitwise determinism, build and memory
errors, the tuned matmul on awkward shapes and layouts. Each result is checked against NumPy."""

import numpy as np
import pytest

import ndlite
from ndlite.device import BackendUnavailableError, KernelBuildError, OutOfMemoryError
from ndlite.device.registry import probe

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def b():
    found, why = probe("opencl")
    if found is None:
        pytest.skip(f"backend opencl unavailable: {why}")
    return found


def dev(b, array):
    return b.from_numpy(np.asarray(array))


def host(b, x):
    return b.to_numpy(x)


rng = np.random.default_rng(7)


def normal(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---- selection, errors, info --------------------------------------------------------------


def test_device_specs_select_devices(b):
    from ndlite_opencl import OpenCLBackend, devices

    listed = devices.all_devices()
    assert ndlite.get_backend("opencl:0").device.int_ptr == listed[0].int_ptr
    kinds = [devices.kind_of(d) for d in listed]
    assert kinds == sorted(kinds, key=lambda k: k != "GPU"), "GPUs are numbered first"
    for spec, kind in (("cpu", "CPU"), ("gpu", "GPU")):
        if kind in kinds:
            chosen = OpenCLBackend(spec)
            assert devices.kind_of(chosen.device) == kind
            assert chosen.name == f"opencl:{kinds.index(kind)}"
        else:
            with pytest.raises(BackendUnavailableError, match=f"no OpenCL {kind} device"):
                OpenCLBackend(spec)


@pytest.mark.parametrize("spec", ["99", "tpu"])
def test_a_bad_device_spec_says_what_exists(b, spec):
    with pytest.raises(BackendUnavailableError) as err:
        ndlite.get_backend(f"opencl:{spec}")
    assert "opencl" in str(err.value) and err.value.fix


def test_no_platform_explains_how_to_get_one(b, monkeypatch):
    import pyopencl as cl
    from ndlite_opencl import OpenCLBackend

    def no_platforms():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_platforms)
    with pytest.raises(BackendUnavailableError) as err:
        OpenCLBackend(None)
    assert "no OpenCL platform" in err.value.reason
    assert "ndlite[pocl]" in err.value.fix and "OCL_ICD_VENDORS" in err.value.fix
    assert "libnvidia-opencl.so.1" in err.value.fix


def test_info_lists_platforms_devices_memory_fp64(b):
    info = b.info()
    assert info["platforms"] and info["devices"]
    assert "GiB" in info["device"] and "fp64" in info["device"]
    assert info["fp64"] == (np.dtype("float64") in b.dtypes)
    from ndlite.cli.info import collect

    entry = collect()["backends"]["opencl"]
    assert entry["available"] and entry["devices"]


# ---- views write through --------------------------------------------------------------------


def test_assign_through_slice_permute_and_reshape_views_shows_in_the_base(b):
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = dev(b, base)
    expect = base.copy()
    b.assign(b.slice(x, (1, slice(2, None, -1))), 5.0)  # a reversed slice: negative strides
    expect[1, ::-1] = 5.0
    b.assign(b.slice(b.permute(x, (2, 1, 0)), (3,)), dev(b, np.float32([[-1, -2]])))
    expect.transpose(2, 1, 0)[3] = [[-1, -2]]
    flat = b.reshape(x, (24,))
    b.assign(b.slice(flat, (slice(0, 24, 7),)), dev(b, np.float32([9, 8, 7, 6])))
    expect.reshape(24)[0:24:7] = [9, 8, 7, 6]
    np.testing.assert_array_equal(host(b, x), expect)


def test_reshape_is_a_view_where_numpy_makes_one(b):
    x = dev(b, np.arange(24, dtype=np.int64).reshape(4, 6))
    col = b.slice(x, (slice(0, 4, 1), slice(0, 6, 2)))  # strided: (4, 3)
    view = b.reshape(col, (2, 2, 3))
    assert view.data is x.data  # no copy: the rows of `col` stay contiguous runs
    b.assign(view, 0)
    expect = np.arange(24).reshape(4, 6)
    expect[:, ::2] = 0
    np.testing.assert_array_equal(host(b, x), expect)
    copied = b.reshape(b.permute(x, (1, 0)), (24,))
    np.testing.assert_array_equal(host(b, copied), expect.T.reshape(24))


def test_put_into_a_view_with_repeated_indices_keeps_the_last(b):
    base = np.zeros((3, 5), np.float32)
    x = dev(b, base)
    view = b.slice(x, (slice(0, 3, 1), slice(4, None, -2)))  # (3, 3), negative stride
    index = np.array([0, 4, 8, 4, -1, 0])
    values = np.float32([1, 2, 3, 4, 5, 6])
    b.put(view, dev(b, index), dev(b, values))
    np.put(base[:, 4::-2], index, values)
    np.testing.assert_array_equal(host(b, x), base)


def test_assign_between_overlapping_views_reads_before_writing(b):
    x = dev(b, np.arange(10, dtype=np.float32))
    b.assign(b.slice(x, (slice(1, 10, 1),)), b.slice(x, (slice(0, 9, 1),)))
    np.testing.assert_array_equal(host(b, x), np.float32([0, 0, 1, 2, 3, 4, 5, 6, 7, 8]))


# ---- kernel cache, determinism --------------------------------------------------------------


def test_kernels_are_built_once_and_reused(b):
    x, y = dev(b, normal(5, 7)), dev(b, normal(7))
    b.add(x, y)
    b.sum(x, (1,), False)
    builds = b.kernels.builds
    kernel_count = len(b._map_kernels)
    for _ in range(3):
        b.add(dev(b, normal(5, 7)), dev(b, normal(7)))
        b.sum(dev(b, normal(5, 7)), (1,), False)
    assert b.kernels.builds == builds
    assert len(b._map_kernels) == kernel_count


def test_reductions_and_scatter_add_are_bitwise_deterministic(b):
    big = normal(3, 200_000)
    x = dev(b, big)
    first = host(b, b.sum(x, (0, 1), False))
    assert all(host(b, b.sum(x, (0, 1), False)) == first for _ in range(3))
    exact = big.astype(np.float64).sum()
    assert abs(float(first) - exact) <= 8 * np.finfo(np.float32).eps * np.abs(big).sum()

    index = rng.integers(0, 4, (6, 300))
    values = normal(6, 300)
    got = host(b, b.scatter_add(dev(b, index), dev(b, values), 1, 4))
    want = np.zeros((6, 4), np.float32)
    np.add.at(want, (np.arange(6)[:, None], index), values)
    np.testing.assert_array_equal(got, want)  # same order of additions as NumPy's add.at


def test_argmax_picks_the_first_maximum_and_nan(b):
    x = np.float32([[1, 3, 3, 0], [2, np.nan, 5, np.nan], [-np.inf] * 4])
    np.testing.assert_array_equal(host(b, b.argmax(dev(b, x), 1, False)), [1, 1, 0])
    long_row = np.zeros((1, 10_000), np.float32)
    long_row[0, [4321, 9000]] = 1  # a tie far apart: the group reduction must keep the first
    assert host(b, b.argmax(dev(b, long_row), 1, True)).tolist() == [[4321]]


def test_max_and_min_of_signed_zeros_keep_numpys_last_element(b):
    for n in (5, 3000, 200_000):  # one work-item per row, a work-group per row, partials
        x = np.zeros((2, n), np.float32)
        x[:, ::3] = -0.0
        x[0, -1], x[1, -1] = -0.0, 0.0
        for name in ("max", "min"):
            got = host(b, getattr(b, name)(dev(b, x), (1,), False))
            want = getattr(np, name)(x, axis=1)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{name} {n}")


# ---- build and memory errors ---------------------------------------------------------------


def test_a_kernel_that_does_not_build_raises_with_its_log(b):
    with pytest.raises(KernelBuildError) as err:
        b.kernels.build("__kernel void broken(__global float* x) { x[0] = undefined_name; }",
                        "broken.cl")
    assert "broken.cl" in str(err.value)
    assert "undefined_name" in err.value.log


def test_out_of_memory_frees_the_pool_and_names_the_op(b):
    held = b.empty((1024,), np.dtype("float32"))
    del held  # back in the pool, held for reuse
    # more than the device has (some drivers allow one buffer above max_mem_alloc_size)
    too_big = 2 * max(b.device.global_mem_size, b.device.max_mem_alloc_size) // 4
    with pytest.raises(OutOfMemoryError, match=r"full \(\d+,\) float32"):
        b.full((too_big,), 0, np.dtype("float32"))
    assert b.pool.held_blocks == 0  # the retry started from an empty pool
    np.testing.assert_array_equal(host(b, b.full((3,), 2, np.dtype("int32"))), [2, 2, 2])


# ---- elementwise and reductions beyond the conformance suite's dtypes ----------------------


def test_integer_and_bool_semantics_follow_numpy(b):
    a = np.array([7, -7, 5, -5, 0], np.int64)
    d = np.array([2, 2, -2, -2, 3], np.int64)
    np.testing.assert_array_equal(host(b, b.div(dev(b, a), dev(b, d))), a // d)
    np.testing.assert_array_equal(host(b, b.pow(dev(b, d), 3)), d**3)
    np.testing.assert_array_equal(host(b, b.abs(dev(b, a.astype(np.int32)))), np.abs(a))
    p, q = np.array([True, False, True]), np.array([True, True, False])
    np.testing.assert_array_equal(host(b, b.add(dev(b, p), dev(b, q))), p | q)
    np.testing.assert_array_equal(host(b, b.mul(dev(b, p), dev(b, q))), p & q)
    assert host(b, b.sum(dev(b, p), (0,), False)).dtype == np.int64
    f = np.float32([-2.7, -0.5, 0.0, 0.5, 2.7, 1e3])
    for dtype in ("int32", "int64", "bool"):
        np.testing.assert_array_equal(host(b, b.astype(dev(b, f), np.dtype(dtype))),
                                      f.astype(dtype))


def test_reductions_over_strided_and_permuted_inputs(b):
    x = normal(6, 5, 40)
    view = b.slice(b.permute(dev(b, x), (2, 0, 1)), (slice(39, None, -3),))
    ref = x.transpose(2, 0, 1)[39::-3]
    for axes in [(0,), (1, 2), (0, 2), (0, 1, 2)]:
        got = host(b, b.sum(view, axes, True))
        want = ref.astype(np.float64).sum(axis=axes, keepdims=True)
        bound = 8 * np.finfo(np.float32).eps * np.abs(ref).astype(np.float64).sum(
            axis=axes, keepdims=True)
        assert np.all(np.abs(got - want) <= bound)
        np.testing.assert_array_equal(host(b, b.max(view, axes, False)),
                                      ref.max(axis=axes))


def test_empty_and_zero_dim_arrays(b):
    z = dev(b, np.zeros((0, 3), np.float32))
    assert host(b, b.sum(z, (0,), False)).tolist() == [0, 0, 0]
    assert host(b, b.add(z, 1.0)).shape == (0, 3)
    s = dev(b, np.float32(4.0))
    assert host(b, s).shape == ()
    assert host(b, b.sqrt(s)).tolist() == 2.0
    assert host(b, b.matmul(dev(b, normal(2, 0)), dev(b, normal(0, 3)))).tolist() == [[0] * 3] * 2


# ---- the tuned matmul --------------------------------------------------------------------------


def _fast_matmul(b, monkeypatch, params):
    from ndlite_opencl import linalg

    monkeypatch.setattr(linalg, "FAST_MIN_WORK", 0)
    monkeypatch.setattr(b, "_gemm_params", params, raising=False)
    monkeypatch.setattr(b, "_gemm_params_small", params, raising=False)
    monkeypatch.setattr(b, "_matmul_plans", {}, raising=False)  # plans made with other tiles


@pytest.mark.parametrize("params", [(32, 32, 16, 4, 4), (64, 32, 8, 8, 4)])
@pytest.mark.parametrize("gpu", [True, False], ids=["gemm.cl", "gemm_cpu.cl"])
def test_fast_matmul_on_edges_transposes_and_broadcast_batches(b, monkeypatch, params, gpu):
    names = ("TSM", "TSN", "TSK", "WPTM", "WPTN")
    _fast_matmul(b, monkeypatch, dict(zip(names, params, strict=True)))
    monkeypatch.setattr(b, "is_gpu", gpu)  # which kernel takes the unbatched products
    for (m, n, k) in [(64, 64, 32), (33, 70, 19), (1, 5, 3), (97, 1, 40)]:
        a, c = normal(m, k), normal(k, n)
        padded = dev(b, np.pad(a, ((0, 0), (3, 0))))  # an operand at an offset
        for a_view, c_view in [
            (dev(b, a), dev(b, c)),
            (b.permute(dev(b, a.T.copy()), (1, 0)), b.permute(dev(b, c.T.copy()), (1, 0))),
            (b.slice(padded, (slice(0, m, 1), slice(3, k + 3, 1))), dev(b, c)),
        ]:
            got = host(b, b.matmul(a_view, c_view))
            want = a.astype(np.float64) @ c
            assert np.all(np.abs(got - want) <= 8 * np.finfo(np.float32).eps * (
                np.abs(a).astype(np.float64) @ np.abs(c)) + 1e-30), (m, n, k)
    a, c = normal(3, 1, 20, 12), normal(2, 12, 36)
    np.testing.assert_allclose(host(b, b.matmul(dev(b, a), dev(b, c))), a @ c, rtol=1e-5,
                               atol=1e-5)


def test_split_k_products_match_the_reference_and_repeat_bitwise(b, monkeypatch):
    """Few tiles of C and a long K (a weight's gradient, g.T @ x) run as partial products over
    slices of K, then added: within the product's tolerance, the same bits run to run."""
    from ndlite_opencl import linalg

    params = dict(TSM=32, TSN=32, TSK=16, WPTM=4, WPTN=4)
    _fast_matmul(b, monkeypatch, params)
    monkeypatch.setattr(b, "is_gpu", True)  # gemm.cl takes the unbatched products
    monkeypatch.setattr(b, "compute_units", 64)  # 4 tiles of C: far too few for 64 units
    monkeypatch.setattr(linalg, "SPLIT_MIN_K", 32)
    for m, n, k in [(64, 48, 1024), (33, 70, 512), (40, 1, 256)]:
        g, x = normal(k, m), normal(k, n)
        g_t = b.permute(dev(b, g), (1, 0))
        x_dev = dev(b, x)
        launch = linalg._plan(b, g_t, x_dev)[1]
        assert launch[0] == "split" and launch[1][0] > 1, (m, n, k)
        got = host(b, b.matmul(g_t, x_dev))
        want = g.T.astype(np.float64) @ x
        assert got.shape == (m, n)
        assert np.all(np.abs(got - want) <= 8 * np.finfo(np.float32).eps * (
            np.abs(g.T).astype(np.float64) @ np.abs(x)) + 1e-30), (m, n, k)
        np.testing.assert_array_equal(host(b, b.matmul(g_t, x_dev)), got)
    # a batch of one (collapsed away by the plan) keeps its dim; an operand at an offset
    g, x = normal(1, 64, 1024), normal(1030, 48)
    x_view = b.slice(dev(b, x), (slice(6, 1030, 1),))
    assert linalg._plan(b, dev(b, g), x_view)[1][0] == "split"
    got = host(b, b.matmul(dev(b, g), x_view))
    want = g.astype(np.float64) @ x[6:]
    assert got.shape == (1, 64, 48)
    assert np.all(np.abs(got - want) <= 8 * np.finfo(np.float32).eps * (
        np.abs(g).astype(np.float64) @ np.abs(x[6:])) + 1e-30)
    # K not cut into equal slices of whole k-steps, or a batch: one product as before
    assert linalg._splits(b, 64, 64, 1000, (), params) == 1
    assert linalg._splits(b, 64, 64, 1024, (3,), params) == 1
    assert linalg._splits(b, 64, 64, 1024, (), params) > 1
    monkeypatch.setattr(b, "compute_units", 1)  # enough tiles: not split
    assert linalg._splits(b, 64, 64, 1024, (), params) == 1


def test_a_gpu_runs_a_batch_of_mid_sized_products_on_gemm_cl(b, monkeypatch):
    """Attention's products (each under FAST_MIN_WORK, hundreds of them) take the tuned kernel
    on a GPU, read in place through the views' strides."""
    from ndlite_opencl import linalg

    _fast_matmul(b, monkeypatch, dict(TSM=32, TSN=32, TSK=16, WPTM=4, WPTN=4))
    monkeypatch.setattr(linalg, "FAST_MIN_WORK", 2**17)  # 40 x 40 x 32 under it, 4 of them over
    monkeypatch.setattr(linalg, "BATCHED_MIN_WORK", 2**14)
    monkeypatch.setattr(b, "is_gpu", True)
    qkv = normal(2, 40, 3, 2, 32)  # (batch, tokens, q/k/v, heads, head dim)
    dev_qkv = dev(b, qkv)
    q = b.permute(b.slice(dev_qkv, (slice(0, 2, 1), slice(0, 40, 1), 0)), (0, 2, 1, 3))
    k = b.permute(b.slice(dev_qkv, (slice(0, 2, 1), slice(0, 40, 1), 1)), (0, 2, 3, 1))
    kernel = linalg._plan(b, q, k)[1][0]
    assert kernel.function_name == "gemm"
    got = host(b, b.matmul(q, k))
    qh, kh = qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 3, 1)
    want = qh.astype(np.float64) @ kh
    assert np.all(np.abs(got - want) <= 8 * np.finfo(np.float32).eps * (
        np.abs(qh).astype(np.float64) @ np.abs(kh)) + 1e-30)
    monkeypatch.setattr(b, "is_gpu", False)  # a CPU keeps them on matmul.cl
    monkeypatch.setattr(b, "_matmul_plans", {})
    assert linalg._plan(b, q, k)[1][0].function_name == "matmul"


def test_tuning_picks_a_correct_candidate_and_caches_it(b, monkeypatch, tmp_path):
    from ndlite_opencl import tuning

    monkeypatch.setenv("NDLITE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(b, "_gemm_params", False, raising=False)
    small = [(32, 32, 16, 4, 4), (32, 32, 8, 4, 4)]
    monkeypatch.setattr(tuning, "GPU_CANDIDATES", small)
    monkeypatch.setattr(tuning, "CPU_CANDIDATES", small)
    tune = tuning.tune
    monkeypatch.setattr(tuning, "tune", lambda backend, **kw: tune(backend, size=128, **kw))
    params = tuning.gemm_params(b)
    assert params is not None and tuple(params.values()) in small
    assert (tmp_path / "opencl-gemm.json").exists()
    monkeypatch.setattr(b, "_gemm_params", False, raising=False)
    monkeypatch.setattr(tuning, "tune", lambda backend, **kw: pytest.fail("should come from disk"))
    assert tuning.gemm_params(b) == params


def test_batches_of_small_products_tune_apart_on_gpus(b, monkeypatch, tmp_path):
    import json

    from ndlite_opencl import linalg, tuning

    monkeypatch.setenv("NDLITE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(b, "is_gpu", True)
    square, batched = {"TSM": 32, "TSN": 32, "TSK": 16, "WPTM": 4, "WPTN": 4}, None
    monkeypatch.setattr(b, "_gemm_params", square, raising=False)
    monkeypatch.setattr(b, "_gemm_params_small", False, raising=False)
    monkeypatch.setattr(b, "_matmul_plans", {}, raising=False)
    monkeypatch.setattr(tuning, "GPU_CANDIDATES", [(32, 32, 8, 4, 4), (64, 32, 8, 8, 4)])
    monkeypatch.setattr(tuning, "PROBLEMS", {"square": None, "small": (3, 64, 32, 16)})
    batched = tuning.gemm_params(b, "small")
    assert batched is not None and tuple(batched.values()) in tuning.GPU_CANDIDATES
    saved = json.loads((tmp_path / "opencl-gemm.json").read_text())
    assert [k for k in saved if k.endswith(" | small")], "cached under its own key"
    used = []
    launch = linalg.gemm.launch
    monkeypatch.setattr(linalg.gemm, "launch", lambda *a: used.append(a[-1]) or launch(*a))
    monkeypatch.setattr(linalg, "FAST_MIN_WORK", 0)
    monkeypatch.setattr(linalg, "BATCHED_MIN_WORK", 0)
    x, y = normal(5, 16, 24), normal(5, 24, 8)
    got = host(b, b.matmul(dev(b, x), dev(b, y)))
    np.testing.assert_allclose(got, x @ y, rtol=1e-4, atol=1e-4)
    assert used == [batched]
    big = normal(3, 300, 300)  # matrices over SMALL: the square's tiles
    b.matmul(dev(b, big), dev(b, big))
    assert used[-1] == square
