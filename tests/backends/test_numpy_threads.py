"""The NumPy backend's own threads (threads.py) and scratch buffers (scratch.py)."""

import threading

import ndlite_numpy.scratch as scratch
import ndlite_numpy.threads as threads
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st


@given(n=st.integers(0, 50), parts=st.integers(1, 8))
def test_chunks_cover_the_range_in_order(n, parts):
    pieces = threads.chunks(n, parts)
    assert len(pieces) == max(1, min(parts, n))
    assert [i for lo, hi in pieces for i in range(lo, hi)] == list(range(n))
    sizes = [hi - lo for lo, hi in pieces]
    assert max(sizes) - min(sizes) <= 1


def test_plan_gives_every_piece_at_least_min_work():
    w = threads.MIN_WORK
    with threads.forced(4):
        assert threads.plan(100, 2 * w - 1) == [(0, 100)]
        assert threads.plan(100, 3 * w) == [(0, 33), (33, 66), (66, 100)]
        assert threads.plan(100, 100 * w) == [(0, 25), (25, 50), (50, 75), (75, 100)]
        assert threads.plan(3, 100 * w) == [(0, 1), (1, 2), (2, 3)]


def test_run_returns_results_in_piece_order_from_several_threads():
    names = {}
    together = threading.Barrier(3, timeout=10)  # passes only if the 3 pieces run at once

    def part(lo, hi):
        names[lo] = threading.current_thread().name
        together.wait()
        return list(range(lo, hi))

    with threads.forced(3):
        out = threads.run(part, threads.chunks(9, 3))
    assert out == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert names[0] == threading.current_thread().name  # the first piece runs on the caller
    assert len(set(names.values())) == 3


def test_run_waits_for_every_piece_then_raises_the_first_error():
    finished = []

    def part(lo, hi):
        if lo == 0:
            raise ValueError("piece 0 failed")
        threading.Event().wait(0.05)
        finished.append(lo)

    with threads.forced(3), pytest.raises(ValueError, match="piece 0 failed"):
        threads.run(part, threads.chunks(3, 3))
    assert sorted(finished) == [1, 2]  # nothing was still running when the error arrived


def test_blas_runs_single_threaded_inside_and_is_restored_after():
    controllers = threads._controllers()
    if not controllers:
        pytest.skip("threadpoolctl finds no BLAS it can control in this NumPy")
    seen = []
    before = [c.num_threads for c in controllers]
    with threads.forced(2):
        threads.run(lambda lo, hi: seen.append([c.num_threads for c in controllers]),
                    threads.chunks(2, 2))
    assert seen == [[1] * len(controllers)] * 2
    assert [c.num_threads for c in controllers] == before


def test_single_pieces_and_unsplit_products_hold_blas_where_the_pool_owns_the_cores(
        monkeypatch):
    """Where our pool has as many threads as BLAS, a single piece and a product too small to
    split (but large enough for OpenBLAS to thread) run with BLAS at one thread: its worker
    would otherwise spin after them. With more BLAS threads than ours, BLAS keeps them."""
    from threadpoolctl import threadpool_limits

    controllers = threads._controllers()
    if not controllers:
        pytest.skip("threadpoolctl finds no BLAS it can control in this NumPy")
    seen = []
    calls = []

    def spy(a, b, **kwargs):
        calls.append([c.num_threads for c in controllers])
        return np.dot(a, b)

    a = np.ones((64, 64))
    with threadpool_limits(2, user_api="blas"):
        with threads.forced(2):
            threads.run(lambda lo, hi: seen.append([c.num_threads for c in controllers]),
                        [(0, 1)])
            monkeypatch.setattr(threads.np, "matmul", spy)
            out = threads.matmul(a, a)  # 2^18 multiply-adds: OpenBLAS would thread it
            monkeypatch.undo()
        assert seen == [[1] * len(controllers)]
        assert calls == [[1] * len(controllers)]
        np.testing.assert_array_equal(out, a @ a)
        assert [c.num_threads for c in controllers] == [2] * len(controllers)
        monkeypatch.setattr(threads, "total", lambda: 8)  # BLAS may use more than our pool
        monkeypatch.setattr(threads, "count", lambda: 2)
        monkeypatch.setattr(threads.np, "matmul", spy)
        threads.matmul(a, a)
        monkeypatch.undo()
        assert calls[-1] == [2] * len(controllers)


def test_nested_runs_go_inline():
    def inner(lo, hi):
        return threading.current_thread().name

    def outer(lo, hi):
        return threads.run(inner, threads.chunks(4, 2))

    with threads.forced(2):
        out = threads.run(outer, threads.chunks(2, 2))
    # the inner sections ran on whichever thread called them, each entirely
    assert all(len(set(names)) == 1 for names in out)


@pytest.mark.parametrize("shapes", [((300, 40), (40, 70)),  # rows
                                    ((30, 40), (40, 700)),  # columns
                                    ((3000, 40), (40, 4)),  # skinny: rows
                                    ((4, 40), (40, 3000)),  # skinny: columns
                                    ((6, 50, 40), (6, 40, 60)),  # equal batches
                                    ((2, 1, 50, 40), (3, 40, 60))],  # broadcast: NumPy's own
                         ids=["rows", "columns", "skinny-rows", "skinny-columns", "batch",
                              "broadcast"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transposed", [False, True], ids=["c-order", "transposed-b"])
def test_matmul_split_matches_numpy(shapes, dtype, transposed, monkeypatch):
    monkeypatch.setattr(threads, "MIN_WORK", 0)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    if transposed:  # b as the transpose of a C-ordered array, as in x @ W.T
        b = np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)
    with threads.forced(3):
        out = threads.matmul(a, b)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert out.dtype == dtype and out.shape == expected.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


def test_matmul_keeps_numpy_semantics_for_other_dtypes():
    a = np.arange(12).reshape(3, 4)
    with threads.forced(2):
        out = threads.matmul(a, a.T)
    np.testing.assert_array_equal(out, a @ a.T)
    assert out.dtype == (a @ a.T).dtype


def test_scratch_reuses_by_tag_shape_and_dtype():
    scratch.clear()
    a = scratch.buffer("t", (3, 4), np.float32)
    assert scratch.buffer("t", (3, 4), np.float32) is a
    assert scratch.buffer("t", (3, 4), np.float64) is not a
    assert scratch.buffer("u", (3, 4), np.float32) is not a
    z = scratch.buffer("z", (5,), np.float32, zeroed=True)
    assert not z.any()


def test_scratch_stays_within_its_limit(monkeypatch):
    scratch.clear()
    monkeypatch.setattr(scratch, "LIMIT", 4000)
    first = scratch.buffer("a", (250,), np.float32)  # 1000 bytes each
    for tag in "bcd":
        scratch.buffer(tag, (250,), np.float32)
    assert scratch.buffer("a", (250,), np.float32) is first  # 4000 bytes: all kept
    scratch.buffer("e", (250,), np.float32)  # over the limit: the least recent ("b") goes
    assert scratch.buffer("a", (250,), np.float32) is first
    assert len(scratch._local.cache) == 4 and scratch._local.bytes == 4000
    big = scratch.buffer("big", (2000,), np.float32)  # over a quarter of the limit: not kept
    assert scratch.buffer("big", (2000,), np.float32) is not big
    scratch.clear()


def test_scratch_is_per_thread():
    scratch.clear()
    mine = scratch.buffer("t", (8,), np.float32)
    theirs = []
    worker = threading.Thread(target=lambda: theirs.append(scratch.buffer("t", (8,), np.float32)))
    worker.start()
    worker.join()
    assert theirs[0] is not mine
