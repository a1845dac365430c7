"""How the NumPy backend's memory-bound compiled kernels (elementwise.py, pooling.py) run on
several threads: `spread` cuts a kernel's range into contiguous pieces and runs them at once,
either as one launch of the kernel's prange twin on numba's threading layer (with oneDNN the
omp layer, i.e. oneDNN's own OpenMP workers: kernels.py) or on the backend's Python pool
(threads.py). Each piece's result depends on its own range only, so results do not depend on
how the work was cut. docs/DESIGN.md, "The memory-bound ops on every thread", has the
measurements behind the defaults.
"""

from __future__ import annotations

import os

from . import kernels, threads

#: the least elements of a piece of a memory-bound compiled kernel (`spread`): 256 KiB of
#: float32, 10-30 us of one core's work, against a ~5 us launch on numba's omp layer (2-core
#: VM, 2 threads: 2^18 floats cut into two pieces instead of one, relu_grad 0.034 -> 0.029 ms,
#: channel sums 0.039 -> 0.024; 2^16 cut into two pieces of 2^15 lost, relu 0.006 -> 0.010)
MIN_ELEMENTS = 1 << 16
#: how `spread` runs its pieces: "pool" (the backend's threads), "numba" (one parallel launch on
#: numba's threading layer), "off" (the calling thread only); "auto" (default): "numba" on the
#: omp layer (oneDNN's OpenMP pool, kernels.py), else "pool"
SPREAD = {"0": "off", "false": "off", "no": "off"}.get(
    os.environ.get("NDLITE_SPREAD", "auto").strip().lower(),
    os.environ.get("NDLITE_SPREAD", "auto").strip().lower())
if SPREAD not in ("auto", "pool", "numba", "off"):
    raise ValueError(f"NDLITE_SPREAD={SPREAD!r}: expected auto, pool, numba or off (or 0)")
#: in "pool" mode `spread` cuts nothing below this many threads. On the 2-core VM at 2 threads
#: cutting the memory-bound kernels in two on the pool lost (2.4M floats, relu_grad 0.36 ms on
#: one thread, 0.43 on two; seed CNN step 1.05-1.07x PyTorch's uncut, 1.12x cut): waking a pool
#: thread costs more than they gain, and in a step the other core is taken by oneDNN's OpenMP
#: worker, which spins for milliseconds after each primitive ("numba" mode runs on it instead:
#: 0.50 -> 0.28 ms there)
SPREAD_FROM = int(os.environ.get("NDLITE_SPREAD_FROM", "3"))


def spread_mode() -> str:
    """SPREAD, with "auto" resolved: "numba" on numba's omp layer, else "pool" ("off" without
    numba: no kernels)."""
    if kernels.numba is None:
        return "off"
    if SPREAD != "auto":
        return SPREAD
    return "numba" if kernels.layer() == "omp" else "pool"


def spread(n: int, size: int, kernel, twin, *args) -> None:
    """kernel(*args, start, stop) over range(n), for a compiled kernel that releases the GIL
    and touches `size` elements in all: cut into up to threads.total() pieces of at least
    MIN_ELEMENTS (threads.MAX_THREADS does not apply: the pieces do not queue for the GIL), run
    at once. How (SPREAD): "numba": twin(*args, n, parts), the same kernel over the pieces as
    one parallel launch on numba's threading layer (on the omp layer, the OpenMP pool oneDNN
    runs on); "pool": the pieces on the backend's pool (threads.run), from SPREAD_FROM
    threads; "off", and a forked child on the omp layer: on the calling thread.

    A "numba" launch asks for every thread even when it has fewer pieces: oneDNN's primitives
    and the optimizer steps run teams of threads.total() on the same OpenMP pool, and a team
    of another size between them made everything slower (16-core Xeon, 16 threads: MLP
    784-1024-1024-10 step 7.3 ms with teams of `parts`, 5.1 with the kernels serial)."""
    mode = spread_mode()
    if mode == "numba" and not kernels.parallel():
        mode = "off"
    count_ = threads.total()
    least = 2 if mode == "numba" else SPREAD_FROM
    parts = min(count_, n) if size >= 2 * MIN_ELEMENTS and count_ >= least else 1
    if MIN_ELEMENTS:  # (0: as many pieces as threads however small, for tests)
        parts = min(parts, size // MIN_ELEMENTS)
    if parts < 2 or mode == "off":
        kernel(*args, 0, n)
    elif mode == "numba":  # on all the threads, those past `parts` idle: see the docstring
        kernels._launch(twin, count_, *args, n, parts)
    else:
        threads.run(lambda lo, hi: kernel(*args, lo, hi), threads.chunks(n, parts))


def describe() -> str:
    """For `ndlite info`."""
    return (f"{spread_mode()} (NDLITE_SPREAD), pieces of at least {MIN_ELEMENTS} elements, "
            f"the pool from {SPREAD_FROM} threads (NDLITE_SPREAD_FROM)")
