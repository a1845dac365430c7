"""The NumPy backend's own threads: its heavy ops (convolution, pooling, large matmuls) split
their work over the batch and run the parts at once, each part with single-threaded BLAS.

Why not leave threading to BLAS: OpenBLAS parallelizes only the matrix products, and after each
one its worker threads spin for a while (about 0.1 s) waiting for more work, so any copy run on
a second thread of ours right after a product competes with a spinning thread and gains nothing
(docs/DESIGN.md, "CPU performance of the NumPy backend"). Inside `run` BLAS is held at one
thread, so its workers sleep, and the backend's threads have the cores to themselves.

How many threads: as many as BLAS may use (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, or
threadpoolctl.threadpool_limits around the calls), so there is one knob, as with NumPy alone;
at most MAX_THREADS. Without a BLAS that threadpoolctl can control, everything runs on the
calling thread.

Rules for the parts, which run on worker threads:
- they write only into arrays allocated by the caller (the `out=` forms of NumPy calls): a large
  array allocated on a worker comes from a glibc per-thread arena that returns it to the OS when
  freed, so every call would page-fault it in afresh (measured: ~7,700 faults per training step);
- every part's result depends only on its own slice, so results are deterministic for a given
  thread count.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

#: the least work of a piece (in multiply-adds, or an estimate of as many simple operations)
MIN_WORK = 1 << 21
#: products with a side shorter than this are left to BLAS's own threads
SKINNY = 64
#: OpenBLAS threads products from about this many multiply-adds (its GEMM_MULTITHREAD_THRESHOLD
#: of 4, times 65,536)
BLAS_THREADED = 1 << 18
#: at most this many threads: each piece holds the GIL for its dozens of NumPy calls, so beyond
#: a few threads they queue for it (seed CNN step on a 16-core Xeon, BLAS at 16 threads: 56 ms
#: with no threads of ours, 40 / 34 / 38 / 51 / 69 ms with 2 / 4 / 8 / 12 / 16:
#: bench/numpy_threads.py)
MAX_THREADS = 4

_lock = threading.Lock()  # one parallel section at a time; another caller runs inline
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_blas: list | None = None  # threadpoolctl controllers of the BLAS libraries, found once
_forced: int | None = None
_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _controllers() -> list:
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            _blas = list(ThreadpoolController().select(user_api="blas").lib_controllers)
        except Exception:  # no threadpoolctl, or a BLAS it cannot drive: run on one thread
            _blas = []
    return _blas


def count() -> int:
    """How many threads the backend's heavy ops use now."""
    if _forced is not None:
        return _forced
    blas = _controllers()
    if not blas:
        return 1
    return max(1, min(max(c.num_threads for c in blas), _cores, MAX_THREADS))


def total() -> int:
    """How many threads the compiled kernels (kernels.py) use: BLAS's count, up to the cores
    the process may use; they hold no GIL, so MAX_THREADS does not apply."""
    if _forced is not None:
        return _forced
    blas = _controllers()
    return max(1, min(max(c.num_threads for c in blas), _cores)) if blas else _cores


def describe() -> str:
    """The thread counts in force, for `ndlite info`."""
    blas = ", ".join(f"{c.internal_api} {c.num_threads}" for c in _controllers()) or "none"
    return (f"{total()} (BLAS: {blas}; cores usable: {_cores}; Python pool: {count()}); "
            "set OMP_NUM_THREADS / OPENBLAS_NUM_THREADS or threadpoolctl")


class forced:
    """Context manager that fixes the thread count (tests, benchmarks): `with forced(3): ...`."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        global _forced
        self.before, _forced = _forced, self.n

    def __exit__(self, *exc):
        global _forced
        _forced = self.before


def chunks(n: int, parts: int) -> list[tuple[int, int]]:
    """range(n) cut into `parts` contiguous (start, stop) pieces of near-equal size."""
    parts = max(1, min(parts, n))
    bounds = [n * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


def plan(n: int, work: float) -> list[tuple[int, int]]:
    """The pieces of a batch of `n` for an op doing `work` in all: at most one per thread, and
    none doing less than MIN_WORK (a piece costs tens of microseconds of Python and waking)."""
    if work < 2 * MIN_WORK:
        return [(0, n)]
    return chunks(n, min(count(), int(work // MIN_WORK)) if MIN_WORK else count())


def run(part, pieces: list[tuple[int, int]]) -> list:
    """part(start, stop) for every piece, at once, with BLAS single-threaded; results in order.

    The first piece runs on the calling thread. A single piece, or every piece while another
    parallel section is in progress (a nested or concurrent call), runs inline with BLAS as it
    is; except a single piece where our pool has as many threads as BLAS (2 cores), which
    runs with BLAS held at one thread, lest its worker spin after the piece's products (see
    matmul)."""
    if len(pieces) == 1 and 1 < count() == total() and _lock.acquire(blocking=False):
        try:  # one piece on a pool that owns the cores: BLAS held too, see matmul
            with blas_held():
                return [part(*pieces[0])]
        finally:
            _lock.release()
    if len(pieces) == 1 or not _lock.acquire(blocking=False):
        return [part(*p) for p in pieces]
    try:
        global _pool, _pool_size
        if len(pieces) - 1 > _pool_size:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool_size = len(pieces) - 1
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="ndlite-numpy")
        saved = [(c, c.num_threads) for c in _controllers()]
        for c, _ in saved:
            c.set_num_threads(1)
        try:
            futures = [_pool.submit(part, *p) for p in pieces[1:]]
            try:
                results = [part(*pieces[0])]
            finally:
                wait(futures)  # no part may still be writing when the caller goes on
            return results + [f.result() for f in futures]  # raises the first part's error
        finally:
            for c, n in saved:
                c.set_num_threads(n)
    finally:
        _lock.release()


class blas_held:
    """Context manager: BLAS held at one thread inside, so that its workers sleep instead of
    spinning on the cores that the compiled kernels (kernels.py) are about to use."""

    def __enter__(self):
        self.saved = [(c, c.num_threads) for c in _controllers() if c.num_threads > 1]
        for c, _ in self.saved:
            c.set_num_threads(1)

    def __exit__(self, *exc):
        for c, n in self.saved:
            c.set_num_threads(n)


def _after_fork():  # a forked child has the pool object but not its threads
    global _pool, _pool_size
    _pool, _pool_size = None, 0


os.register_at_fork(after_in_child=_after_fork)


def matmul(a, b):
    """np.matmul(a, b), with large equal-batch stacks split over the threads by their leading
    axis. A 2-D product is BLAS's alone where BLAS may use more threads than our pool (cut
    into at most MAX_THREADS pieces, each holding the GIL, it held the MLP 784-1024-1024-10 at
    5.2x PyTorch's step on a 16-core Xeon); where the pool matches BLAS (2 cores) it is cut by
    rows or columns over our threads with BLAS held at one, which kept the seed CNN's step
    1.6x faster there than BLAS's own spinning threads (3,600 against 2,300 images/s).

    Smaller products, skinny ones (a side under SKINNY: memory-bound, where BLAS's own threads
    share out the memory traffic far better than a Python pool: 2000x2000 @ 2000x4 took 0.13 ms
    on 16 OpenBLAS threads, 0.7-0.9 ms cut into 2-16 pieces here), broadcast stacks and other
    dtypes are np.matmul's own. Where our pool has as many threads as BLAS (2 cores), 2-D
    skinny products are cut along their long side like the others, and the products left
    whole that OpenBLAS would thread (from BLAS_THREADED multiply-adds) run with BLAS held at
    one thread: its worker would otherwise spin for ~0.1 s after them, on the core our next
    parallel section needs (VGG-style step on the 2-core VM: the three products of its last
    Linear took 4-22 ms a step, the convolutions after them up to twice their time)."""
    work = a.size * b.shape[-1] if a.ndim >= 2 and b.ndim >= 2 else 0
    if work < 2 * MIN_WORK or a.dtype != b.dtype or a.dtype.char not in "fd":
        return _alone(a, b, work)
    m, n = a.shape[-2], b.shape[-1]
    skinny = min(a.shape[-2:] + b.shape[-1:]) < SKINNY
    if a.ndim == 2 and b.ndim == 2:
        if count() < total():  # BLAS may use more threads than our pool: all of them
            return np.matmul(a, b)
        # (skinny ones too: they are cut along their long side, BLAS held at one thread)
        # as many of ours as BLAS's (2 cores): our pieces, BLAS asleep, measured faster
        out = np.empty((m, n), dtype=a.dtype)
        if m >= n:
            run(lambda lo, hi: np.matmul(a[lo:hi], b, out=out[lo:hi]), plan(m, work))
        else:
            run(lambda lo, hi: np.matmul(a, b[:, lo:hi], out=out[:, lo:hi]), plan(n, work))
        return out
    if a.shape[:-2] == b.shape[:-2] and not skinny:
        out = np.empty(a.shape[:-1] + (n,), dtype=a.dtype)
        run(lambda lo, hi: np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi]),
            plan(a.shape[0], work))
        return out
    return _alone(a, b, work)


def _alone(a, b, work):
    """np.matmul(a, b) as one call: BLAS held at one thread where it would thread the product
    and our pool matches its thread count (see matmul)."""
    if work >= BLAS_THREADED and 1 < count() == total():
        with blas_held():
            return np.matmul(a, b)
    return np.matmul(a, b)
