"""The NumPy backend's memory-bound kernels spread over threads (elementwise.py, threads.spread,
optim.py's RMSprop; numba, optional): ReLU, relu_grad and the bias add bit for bit against
NumPy's ufuncs (NaN payloads, signed zeros, infinities), the bias-gradient sums against float64
sums and the same bits at 1, 2, 3 and 16 threads, the fallbacks (non-contiguous, broadcast, tiny,
empty, halves, numba off), and RMSprop bit for bit against the reference."""

import contextlib
import os

import ndlite_numpy.elementwise as elementwise
import ndlite_numpy.kernels as kernels
import ndlite_numpy.optim as optim
import ndlite_numpy.spread as spread
import ndlite_numpy.threads as threads_
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndlite.device import fallbacks

pytestmark = pytest.mark.skipif(not kernels.enabled(),
                                reason=f"compiled kernels off: {kernels.status()}")

THREADS = pytest.mark.parametrize("threads", [1, 2, 3, 16])
MODES = pytest.mark.parametrize("mode", ["pool", "numba"])
DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64])


@pytest.fixture(scope="module")
def b():
    return pytest.importorskip("ndlite_numpy").NumpyBackend()


@contextlib.contextmanager
def pieces(threads: int, mode: str = "pool"):
    """`threads` pieces however small the operands, run the `mode` way (threads.SPREAD), and
    the kernels for any size."""
    names = ("MIN_ELEMENTS", "SPREAD_FROM", "SPREAD")
    before = [getattr(spread, k) for k in names], elementwise.MIN_SIZE
    for k, v in zip(names, (0, 1, mode)):
        setattr(spread, k, v)
    elementwise.MIN_SIZE = 0
    try:
        with threads_.forced(threads):
            yield
    finally:
        for k, v in zip(names, before[0]):
            setattr(spread, k, v)
        elementwise.MIN_SIZE = before[1]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}")


def special(shape, dtype, seed=0) -> np.ndarray:
    """Normal values with NaNs (both signs, a payload), signed zeros and infinities mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    nan = np.array([0x7FC00001 if dtype == np.float32 else 0x7FF8000000000001],
                   dtype=f"u{np.dtype(dtype).itemsize}").view(dtype)[0]
    values = np.array([np.nan, -np.nan, nan, -0.0, 0.0, np.inf, -np.inf], dtype)
    where = rng.integers(0, flat.size, size=min(flat.size, 40))
    flat[where] = values[rng.integers(0, len(values), size=len(where))]
    return x


shapes = st.tuples(st.integers(1, 5), st.integers(1, 7), st.integers(1, 9), st.integers(1, 9))


@MODES
@THREADS
@DTYPES
@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_relu_and_its_gradient_are_numpys_bit_for_bit(b, mode, threads, dtype, shape, seed):
    x, grad = special(shape, dtype, seed), special(shape, dtype, seed + 1)
    with pieces(threads, mode):
        out = elementwise.relu(x)
        back = elementwise.relu_grad(grad, x)
    np.testing.assert_array_equal(bits(out), bits(np.maximum(x, dtype(0))))
    np.testing.assert_array_equal(bits(back), bits(np.where(x > 0, grad, dtype(0))))
    assert out.dtype == back.dtype == dtype and out.shape == back.shape == x.shape


@MODES
@THREADS
@DTYPES
@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), bias_rank=st.sampled_from([3, 4]))
def test_bias_add_is_numpys_bit_for_bit(mode, threads, dtype, shape, seed, bias_rank):
    x = special(shape, dtype, seed)
    bias = special((shape[1],), dtype, seed + 1).reshape((1,) * (bias_rank - 3) + (-1, 1, 1))
    with pieces(threads, mode):
        out = elementwise.bias_add(x, bias)
    with np.errstate(invalid="ignore"):
        ref = np.add(x, bias)
    # bit for bit, except which payload a NaN + NaN keeps (the order of the operands in
    # NumPy's SIMD loop, not arithmetic)
    both = np.isnan(out) & np.isnan(ref) & np.isnan(x) & np.isnan(np.broadcast_to(bias, x.shape))
    np.testing.assert_array_equal(bits(out)[~both], bits(ref)[~both])
    assert np.isnan(out[both]).all()


@DTYPES
@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_bias_sums_are_float64_sums_rounded_once_the_same_bits_at_any_thread_count(
        dtype, shape, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, size=shape)).astype(dtype)
    matrix = x.reshape(shape[0] * shape[1], -1)
    got = []
    for threads, mode in ((1, "pool"), (2, "pool"), (3, "pool"), (16, "pool"), (2, "numba"),
                          (3, "numba"), (16, "numba")):
        with pieces(threads, mode):
            got.append((elementwise.channel_sum(x, (0, 2, 3), False),
                        elementwise.column_sum(matrix, (0,), False)))
    for a, m in got[1:]:
        np.testing.assert_array_equal(bits(a), bits(got[0][0]))
        np.testing.assert_array_equal(bits(m), bits(got[0][1]))
    channel, column = got[0]
    x64 = x.astype(np.float64)
    for ours, exact, scale in (
            (channel, x64.sum(axis=(0, 2, 3)), np.abs(x64).sum(axis=(0, 2, 3))),
            (column, matrix.astype(np.float64).sum(axis=0), np.abs(matrix).sum(axis=0))):
        assert ours.dtype == dtype
        # float64 accumulation rounded once: within the dtype's rounding (float64's own
        # accumulation error is far below, relative to the sum of magnitudes)
        tol = np.finfo(dtype).eps * np.abs(exact) + 64 * np.finfo(np.float64).eps * scale
        assert np.all(np.abs(ours.astype(np.float64) - exact) <= tol)


def test_sums_keep_dims_take_other_ranks_and_propagate_nan(b):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5, 6, 2)).astype(np.float32)
    with pieces(2):
        kept = elementwise.channel_sum(x, (0, 2, 3, 4), True)
        m = elementwise.column_sum(x.reshape(12, -1), (0,), True)
        x[1, 2, 0, 0, 0] = np.nan
        with_nan = elementwise.channel_sum(x, (0, 2, 3, 4), False)
        assert elementwise.channel_sum(x, (0, 2, 3), False) is None  # not every axis but 1
        assert elementwise.channel_sum(x, (2, 3, 4), False) is None
        assert elementwise.column_sum(x.reshape(12, -1), (1,), False) is None
    assert kept.shape == (1, 3, 1, 1, 1) and m.shape == (1, 60)
    assert np.isnan(with_nan[2]) and not np.isnan(with_nan[:2]).any()


def test_fallbacks_for_what_the_kernels_do_not_take():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6, 8, 8)).astype(np.float32)
    with pieces(2):
        assert elementwise.relu(x[:, ::2]) is None  # not contiguous
        assert elementwise.relu(x.astype(np.float16)) is None
        assert elementwise.relu(x.astype(np.int32)) is None
        assert elementwise.relu_grad(x, x.astype(np.float64)) is None  # mixed dtypes
        assert elementwise.relu_grad(x, x[:1]) is None  # broadcast
        assert elementwise.bias_add(x, np.ones((1, 1, 1, 8), np.float32)) is None
        assert elementwise.bias_add(x, np.ones((1, 6, 8, 1), np.float32)) is None
        assert elementwise.bias_add(x, np.ones((6, 1), np.float32)) is None  # over H, not C
        assert elementwise.channel_sum(x.transpose(1, 0, 2, 3), (0, 2, 3), False) is None
        empty = np.empty((0, 6, 8, 8), np.float32)
    assert elementwise.relu(empty) is None and elementwise.relu(x[:1, :1, :2]) is None  # tiny


@THREADS
def test_backend_ops_take_the_kernels_on_large_operands_and_match_the_numpy_path(b, threads):
    x = special((8, 16, 24, 24), np.float32)  # 73,728 elements: past MIN_SIZE
    grad = special(x.shape, np.float32, 1)
    bias = np.random.default_rng(2).standard_normal((1, 16, 1, 1)).astype(np.float32)
    bias[0, 3] = -0.0  # (no NaN: which payload NaN + NaN keeps is NumPy's loop's, see above)
    with threads_.forced(threads):
        ours = (b.relu(x), b.relu_grad(grad, x), b.add(x, bias), b.add(bias, x),
                b.sum(grad, (0, 2, 3), True), b.sum(grad.reshape(128, -1), (0,), False))
    with kernels.disabled():  # what NDLITE_NUMBA=0 runs
        theirs = (b.relu(x), b.relu_grad(grad, x), b.add(x, bias), b.add(bias, x),
                  b.sum(grad, (0, 2, 3), True), b.sum(grad.reshape(128, -1), (0,), False))
    for a, r in zip(ours[:4], theirs[:4]):
        np.testing.assert_array_equal(bits(a), bits(r))
    for a, r in zip(ours[4:], theirs[4:]):  # NaNs in grad: NaN sums where there are
        assert a.shape == r.shape and a.dtype == r.dtype
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-4)


def test_spread_cuts_into_pieces_of_at_least_min_elements_from_spread_from_threads():
    seen = []

    def cut(n, size):
        seen.clear()
        spread.spread(n, size, lambda lo, hi: seen.append((lo, hi)), None)
        return sorted(seen)

    big, before = spread.MIN_ELEMENTS, spread.SPREAD
    spread.SPREAD = "pool"  # (a Python part: no compiled twin for "numba")
    try:
        with threads_.forced(3):
            assert cut(10, 3 * big) == [(0, 3), (3, 6), (6, 10)]
            assert cut(10, big) == [(0, 10)]  # too small to cut
            assert cut(2, 10 * big) == [(0, 1), (1, 2)]  # no more pieces than items
            spread.SPREAD = "off"
            assert cut(10, 10 * big) == [(0, 10)]
            spread.SPREAD = "pool"
        with threads_.forced(spread.SPREAD_FROM - 1):
            assert cut(10, 10 * big) == [(0, 10)]
    finally:
        spread.SPREAD = before


@pytest.mark.parametrize("size", [37, 5000, optim.MIN_SIZE + 5],
                         ids=["serial", "serial-long", "parallel"])
@DTYPES
@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_rmsprop_step_is_the_reference_bit_for_bit(b, size, dtype, centered, momentum,
                                                   weight_decay):
    rng = np.random.default_rng(0)
    state = [rng.standard_normal(size).astype(dtype) for _ in range(2)]
    state.append(np.abs(rng.standard_normal(size)).astype(dtype))
    extra = [rng.standard_normal(size).astype(dtype) * dtype(0.1) if centered else None,
             rng.standard_normal(size).astype(dtype) if momentum else None]
    ours = [None if a is None else a.copy() for a in state + extra]
    reference = [None if a is None else a.copy() for a in state + extra]
    for _ in range(3):
        assert optim.rmsprop_step(*ours, 1e-2, 0.99, 1e-8, momentum, weight_decay)
        fallbacks.rmsprop_step(b, *reference, 1e-2, 0.99, 1e-8, momentum, weight_decay)
    for a, r in zip(ours, reference):
        if a is not None:
            np.testing.assert_array_equal(bits(a), bits(r))


def test_rmsprop_leaves_other_dtypes_and_layouts_to_the_reference():
    half = np.ones(10, np.float16)
    assert not optim.rmsprop_step(half, half, half, None, None, 1e-2, 0.99, 1e-8, 0.0, 0.0)
    x = np.ones((4, 6), np.float32)
    assert not optim.rmsprop_step(x[:, ::2], x[:, ::2], x[:, ::2], None, None, 1e-2, 0.99,
                                  1e-8, 0.0, 0.0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_a_forked_child_runs_the_kernels_without_parallel_launches(b):
    """On the omp layer a parallel launch in a forked child would kill it (GNU OpenMP's
    threads do not survive fork()): there the serial kernels and the NumPy paths run."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16, 32, 32)).astype(np.float32)  # past every threshold
    weight, bias = np.ones(16, np.float32), np.zeros(16, np.float32)
    with threads_.forced(2):
        parent = (b.relu(x), b.sum(x, (0, 2, 3), False), b.batch_norm(x, weight, bias, 1e-5)[0])
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if everything ran and matched
            code = 1
            try:
                child = (b.relu(x), b.sum(x, (0, 2, 3), False),
                         b.batch_norm(x, weight, bias, 1e-5)[0])
                p = np.zeros(optim.MIN_SIZE, np.float32)
                assert optim.rmsprop_step(p, p + 1, p + 1, None, None, 0.1, 0.9, 1e-8, 0.0, 0.0)
                ok = (np.array_equal(child[0], parent[0]) and np.array_equal(child[1], parent[1])
                      and np.allclose(child[2], parent[2], atol=1e-5))
                code = 0 if ok else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_a_launch_gives_libgomp_s_thread_count_back():
    """numba's omp layer sets libgomp's count, which oneDNN and PyTorch share: the launch
    gives it back (kernels._launch)."""
    import ndlite_numpy.onednn as onednn

    if onednn._lib is None or not kernels.parallel():
        pytest.skip("needs oneDNN's libgomp and parallel kernels")
    gomp = onednn._gomp
    before = gomp.omp_get_max_threads()
    try:
        gomp.omp_set_num_threads(7)
        with pieces(2, "numba"):
            x = np.linspace(-1, 1, 1 << 18, dtype=np.float32)
            np.testing.assert_array_equal(elementwise.relu(x), np.maximum(x, 0))
        assert gomp.omp_get_max_threads() == 7
    finally:
        gomp.omp_set_num_threads(before)


@pytest.mark.parametrize("value, mode", [("0", "off"), ("off", "off"), ("pool", "pool"),
                                         ("typo", None)])
def test_NDLITE_SPREAD_is_read_strictly(value, mode):
    import subprocess
    import sys

    code = "import ndlite_numpy.spread as s; print(s.SPREAD)"
    env = {**os.environ, "NDLITE_SPREAD": value}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if mode is None:
        assert done.returncode != 0 and "NDLITE_SPREAD='typo'" in done.stderr
    else:
        assert done.returncode == 0 and done.stdout.strip() == mode
