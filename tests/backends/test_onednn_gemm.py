"""float32 matrix products through oneDNN's dnnl_sgemm (onednn_gemm.py) against float64
products: every operand layout it takes without a copy (row- or column-contiguous, with a
leading dimension) and the ones it copies; bitwise determinism at a fixed thread count; the
backend's matmul routing. Skipped, with the reason, where libdnnl.so.3 is not installed."""

import ndlite_numpy.onednn as onednn
import ndlite_numpy.onednn_gemm as gemm
import ndlite_numpy.threads as threads
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.skipif(not onednn.available(), reason=f"oneDNN {onednn.status()}")


def layouts(x: np.ndarray, rng) -> list:
    """x as a C array, an F array, a slice of a larger C and F array, every other row and
    column of a larger one, and a negative-stride view."""
    m, k = x.shape
    big_c = rng.standard_normal((m + 3, k + 5), dtype=np.float32)
    big_c[1:m + 1, 2:k + 2] = x
    big_f = np.asfortranarray(big_c)
    spread = np.zeros((2 * m, 2 * k), np.float32)
    spread[::2, ::2] = x
    flipped = np.ascontiguousarray(x[::-1])[::-1]
    return [x, np.asfortranarray(x), big_c[1:m + 1, 2:k + 2], big_f[1:m + 1, 2:k + 2],
            spread[::2, ::2], flipped]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 70), st.integers(1, 70), st.integers(1, 70), st.integers(0, 2**16),
       st.sampled_from([1, 2]))
def test_against_float64(m, k, n, seed, n_threads):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 * np.sqrt(k) * max(1.0, float(np.abs(want).max()))
    with threads.forced(n_threads):
        for x in layouts(a, rng):
            for y in layouts(b, rng):
                got = gemm.matmul(x, y)
                assert got.dtype == np.float32 and got.shape == (m, n)
                np.testing.assert_allclose(got, want, rtol=0, atol=tol)


def test_declines():
    a, b = np.ones((4, 3)), np.ones((3, 2))
    assert gemm.matmul(a, b) is None  # float64
    assert gemm.matmul(a.astype(np.float32), b) is None  # mixed
    a32 = np.ones((2, 4, 3), np.float32)
    assert gemm.matmul(a32, b.astype(np.float32)) is None  # a stack: NumPy's
    assert gemm.matmul(np.ones((0, 3), np.float32), b.astype(np.float32)) is None
    with onednn.disabled():
        assert gemm.matmul(a.astype(np.float32), b.astype(np.float32)) is None


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_bitwise_deterministic(n_threads):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 784), dtype=np.float32)
    b = rng.standard_normal((1024, 784), dtype=np.float32).T  # x @ W.T
    with threads.forced(n_threads):
        first = gemm.matmul(a, b)
        assert all(np.array_equal(first, gemm.matmul(a, b)) for _ in range(3))


def test_backend_routes_large_float32_products():
    backend = pytest.importorskip("ndlite_numpy").NumpyBackend()
    rng = np.random.default_rng(2)
    a = rng.standard_normal((128, 300), dtype=np.float32)
    w = rng.standard_normal((200, 300), dtype=np.float32)
    got = backend.matmul(a, w.T)
    assert np.array_equal(got, gemm.matmul(a, w.T))  # through oneDNN (over BLAS_THREADED)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T.astype(np.float64), atol=1e-3)
    small = backend.matmul(a[:2, :8], w[:3, :8].T)  # under the threshold: NumPy's
    np.testing.assert_allclose(small, a[:2, :8] @ w[:3, :8].T, rtol=1e-6)
