"""The CuPy backend's gather, scatter_add, put, assign and reductions against the NumPy
backend: deterministic (no atomics), NumPy's bits through views and on duplicated indices,
NumPy's choice between -0.0 and +0.0 in max/min. (Device selection, transfers, matmul and
memory: test_cupy.py.)

Skipped, saying why, where CuPy or a CUDA device is missing (CI has no GPU).
"""

import itertools

import numpy as np
import pytest

from ndlite.device.registry import probe

BACKEND, WHY = probe("cupy")
if BACKEND is None:
    pytest.skip(f"backend cupy unavailable: {WHY}", allow_module_level=True)

from bitwise import assert_same_bits, bits, rng  # noqa: E402
from ndlite_cupy.indexing import DIRECT_MAX_LENGTH  # noqa: E402

from ndlite.device import get_backend  # noqa: E402

b = BACKEND
ref = get_backend("numpy")
FLOATS = ["float32", "float64"]
ALL_DTYPES = ["float32", "float64", "int32", "int64", "bool"]


def on_gpu(a):
    return b.from_numpy(np.asarray(a))


def host(x):
    return b.to_numpy(x)


# ---- gather, scatter_add, put ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_matches_numpy_with_broadcast_indices(dtype, axis):
    r = rng(axis)
    shape = (3, 4, 5)
    x = (r.standard_normal(shape) * 5).astype(dtype)
    index_shape = [1 if d == (axis + 1) % 3 else n for d, n in enumerate(shape)]
    index_shape[axis] = 7
    index = r.integers(0, shape[axis], index_shape)
    got = host(b.gather(on_gpu(x), on_gpu(index), axis))
    np.testing.assert_array_equal(got, ref.gather(x, index, axis))
    # from a non-contiguous view
    xt = np.ascontiguousarray(np.transpose(x, (2, 1, 0)))
    view = b.permute(on_gpu(xt), (2, 1, 0))
    np.testing.assert_array_equal(host(b.gather(view, on_gpu(index), axis)), got)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("length", [1, 5, DIRECT_MAX_LENGTH, DIRECT_MAX_LENGTH + 1, 300])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_add_equals_numpy_add_at_bitwise(dtype, length, axis):
    r = rng(length + axis)
    shape = [3, 4, 2]
    shape[axis] = length
    index_shape = list(shape)
    index_shape[(axis + 1) % 3] = 1  # an index dim that broadcasts
    size = 7
    index = r.integers(0, size, index_shape)
    values = (r.standard_normal(shape) * 100).astype(dtype)
    got = host(b.scatter_add(on_gpu(index), on_gpu(values), axis, size))
    want = ref.scatter_add(index, values, axis, size)
    assert got.dtype == want.dtype and got.shape == want.shape
    # both add each output's contributions in ascending order along the axis: same bits
    np.testing.assert_array_equal(got, want)


def test_scatter_add_of_a_view_and_of_empty_axes():
    values = rng().standard_normal((70, 3)).astype(np.float32)
    index = rng(1).integers(0, 4, (70, 1))
    view = b.permute(on_gpu(np.ascontiguousarray(values.T)), (1, 0))
    np.testing.assert_array_equal(host(b.scatter_add(on_gpu(index), view, 0, 4)),
                                  ref.scatter_add(index, values, 0, 4))
    empty = b.scatter_add(on_gpu(np.zeros((0, 1), np.int64)),
                          on_gpu(np.zeros((0, 3), np.float32)), 0, 5)
    np.testing.assert_array_equal(host(empty), np.zeros((5, 3), np.float32))


@pytest.mark.parametrize("shape, size", [((1 << 18, 3), 5), ((4096, 64), 1000)])
def test_scatter_add_is_deterministic_on_heavily_duplicated_indices(shape, size):
    r = rng(7)
    index = r.integers(0, size, (shape[0], 1))
    values = r.standard_normal(shape).astype(np.float32)
    i, v = on_gpu(index), on_gpu(values)
    runs = [host(b.scatter_add(i, v, 0, size)) for _ in range(4)]
    for run in runs[1:]:
        np.testing.assert_array_equal(bits(run), bits(runs[0]))
    np.testing.assert_array_equal(runs[0], ref.scatter_add(index, values, 0, size))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_put_writes_through_a_strided_view_and_the_last_write_wins(dtype):
    base_host = (rng().standard_normal((5, 6)) * 10).astype(dtype)
    base = on_gpu(base_host)
    key = (slice(1, 5, 2),)
    view = b.slice(b.permute(base, (1, 0)), key)  # (2, 5), not contiguous
    positions = np.array([0, 3, 3, 9, 0, 4, 7, 3])
    values = (rng(1).standard_normal(positions.size) * 10).astype(dtype)
    b.put(view, on_gpu(positions), on_gpu(values))
    ref.put(ref.slice(ref.permute(base_host, (1, 0)), key), positions, values)
    np.testing.assert_array_equal(host(base), base_host)


def test_put_of_values_that_alias_the_destination():
    h = np.arange(8, dtype=np.float32)
    x = on_gpu(h)
    b.put(x, on_gpu(np.arange(1, 8)), b.slice(x, (slice(0, 7, 1),)))
    ref.put(h, np.arange(1, 8), h[:7].copy())
    np.testing.assert_array_equal(host(x), h)


def test_assign_writes_through_views_casts_and_handles_overlap():
    h = np.arange(10, dtype=np.float32)
    x = on_gpu(h)
    b.assign(b.slice(x, (slice(1, 10, 1),)), b.slice(x, (slice(0, 9, 1),)))  # a shifted copy
    h[1:] = h[:-1]
    np.testing.assert_array_equal(host(x), h)
    grid = on_gpu(np.zeros((4, 6), np.int32))
    view = b.slice(b.permute(grid, (1, 0)), (slice(0, 6, 2),))  # (3, 4) strided
    b.assign(view, on_gpu(np.full((1, 4), 2.9, np.float64)))  # broadcast, cast (truncates)
    want = np.zeros((4, 6), np.int32)
    want.T[0:6:2] = 2
    np.testing.assert_array_equal(host(grid), want)
    b.assign(view, -1)
    want.T[0:6:2] = -1
    np.testing.assert_array_equal(host(grid), want)


# ---- reductions -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reducing_no_axes_follows_numpy_dtypes(dtype):
    h = (rng().standard_normal((2, 3)) * 5).astype(dtype)
    for op in ("sum", "max", "min"):
        got, want = host(getattr(b, op)(on_gpu(h), (), False)), getattr(ref, op)(h, (), False)
        assert got.dtype == want.dtype, op
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_max_and_min_match_numpy_over_any_axes(dtype):
    h = (rng().standard_normal((3, 4, 5)) * 10).astype(dtype)
    x = on_gpu(h)
    for axes in ((0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)):
        for keepdims in (False, True):
            for op in ("max", "min"):
                got, want = host(getattr(b, op)(x, axes, keepdims)), getattr(ref, op)(h, axes,
                                                                                    keepdims)
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want, err_msg=f"{op} {axes} {keepdims}")


@pytest.mark.parametrize("shape, axes", [((1 << 20,), (0,)), ((1000, 1000), (0, 1)),
                                         ((1000, 1000), (1,)), ((1000, 1000), (0,))])
def test_max_and_min_of_large_arrays(shape, axes):
    # large reductions take CuPy's CUB path, which compiles the kernel differently
    h = rng().standard_normal(shape).astype(np.float32)
    for op in ("max", "min"):
        got = host(getattr(b, op)(on_gpu(h), axes, False))
        np.testing.assert_array_equal(got, getattr(ref, op)(h, axes, False), err_msg=op)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_and_min_break_signed_zero_ties_like_numpy(dtype):
    # NumPy keeps the later of two equal values; on short rows (before its SIMD loops start)
    # that decides -0.0 against +0.0, and the conformance suite compares those bits
    for n in (2, 3, 4):
        for signs in itertools.product((-0.0, 0.0), repeat=n):
            row = np.array(signs, dtype)
            for op in ("max", "min"):
                got = host(getattr(b, op)(on_gpu(row), (0,), False))
                assert_same_bits(got, getattr(ref, op)(row, (0,), False), f"{op} {signs}")
                column = np.stack([row, -row], axis=1)  # (n, 2), reduced along axis 0
                got = host(getattr(b, op)(on_gpu(column), (0,), False))
                assert_same_bits(got, getattr(ref, op)(column, (0,), False), f"{op} {signs}")


def test_argmax_and_argmin_pick_the_first_extremum():
    h = np.array([[1, 3, 3, 0], [2, 2, 0, 2], [5, 5, 5, 5]], np.float32)
    for op in ("argmax", "argmin"):
        for axis in (0, 1):
            for keepdims in (False, True):
                got = host(getattr(b, op)(on_gpu(h), axis, keepdims))
                want = getattr(ref, op)(h, axis, keepdims)
                assert got.dtype == np.int64
                np.testing.assert_array_equal(got, want, err_msg=f"{op} {axis} {keepdims}")


def test_reductions_are_deterministic_run_to_run():
    h = rng().standard_normal((4096, 1024)).astype(np.float32)
    x = on_gpu(h)
    for axes in ((0, 1), (0,), (1,)):
        runs = [host(b.sum(x, axes, False)) for _ in range(3)]
        for run in runs[1:]:
            np.testing.assert_array_equal(bits(run), bits(runs[0]))
        scale = np.abs(h).astype(np.float64).sum(axis=axes)
        assert np.all(np.abs(runs[0] - h.astype(np.float64).sum(axis=axes))
                      <= 8 * np.finfo(np.float32).eps * scale)
