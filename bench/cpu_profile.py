"""Where a CPU training step's time goes at N threads, ndlite's NumPy backend beside PyTorch CPU
(issue 20): for each model of bench/cpu_models.py, each framework alone (not interleaved),
the step time's spread (median, 90th percentile, max: outliers point at threads fighting for
cores), ndlite's time per backend call and PyTorch's per op (torch.profiler, self CPU time).

    python bench/cpu_profile.py --threads 16 [--models seed_cnn vgg mlp] [--steps 40]
        [--blas-one]

--blas-one holds OpenBLAS at one thread while ndlite's own kernels keep N (threads.forced):
if the step's outliers go away, OpenBLAS's spinning workers were taking the cores of the
OpenMP kernels that run after a product.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def spread(seconds: list[float]) -> str:
    ms = sorted(s * 1e3 for s in seconds)
    return (f"median {statistics.median(ms):.2f} ms, p90 {ms[int(0.9 * (len(ms) - 1))]:.2f}, "
            f"min {ms[0]:.2f}, max {ms[-1]:.2f}")


def batch(name: str):
    import numpy as np
    from cpu_models import SHAPES

    rng = np.random.default_rng(0)
    shape, classes = SHAPES[name]
    return rng.standard_normal(shape, dtype=np.float32), rng.integers(0, classes, shape[0])


def ndlite_part(name: str, steps: int, threads: int, blas_one: bool) -> None:
    import contextlib

    from cpu_models import make_step
    from host_profile import per_call
    from ndlite_numpy import threads as nthreads

    import ndlite

    x, y = batch(name)
    hold = contextlib.ExitStack()
    if blas_one:
        from threadpoolctl import threadpool_limits

        hold.enter_context(nthreads.forced(threads))
        hold.enter_context(threadpool_limits(1, user_api="blas"))
    with hold:
        step = make_step("ndlite", name)
        for _ in range(5):
            step(x, y)
        times = [step(x, y) for _ in range(steps)]
        b = ndlite.get_backend("numpy")
        spent, counts = per_call(b, lambda: step(x, y), steps)
    print(f"ndlite {name}: {spread(times)}; {sum(counts.values()) / steps:.0f} calls, "
          f"{sum(spent.values()) / steps * 1e3:.2f} ms in them (per step)")
    for op, seconds in spent.most_common(14):
        print(f"    {op:24s} {seconds / steps * 1e3:8.3f} ms {counts[op] / steps:6.1f} calls")


def torch_part(name: str, steps: int) -> None:
    import torch
    from cpu_models import make_step

    x, y = batch(name)
    step = make_step("torch", name)
    for _ in range(5):
        step(x, y)
    times = [step(x, y) for _ in range(steps)]
    print(f"torch {name}: {spread(times)}")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step(x, y)
    totals = collections.Counter()
    calls = collections.Counter()
    for e in prof.key_averages():
        if e.key.startswith(("aten::", "Optimizer.")) or "Backward" in e.key:
            totals[e.key] += e.self_cpu_time_total
            calls[e.key] += e.count
    for op, us in totals.most_common(14):
        print(f"    {op:40s} {us / steps / 1e3:8.3f} ms {calls[op] / steps:6.1f} calls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--models", nargs="+", default=["seed_cnn", "vgg", "mlp"])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--blas-one", action="store_true")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--torch-first", action="store_true",
                        help="PyTorch's part of each model before ndlite's")
    args = parser.parse_args()
    n = common.pin_threads(args.threads)
    import ndlite

    print(f"threads {n}; {ndlite.get_backend('numpy').info().get('threads')}")
    for name in args.models:
        t0 = time.perf_counter()
        order = ["torch", "ndlite"] if args.torch_first else ["ndlite", "torch"]
        for which in order:
            if which == "ndlite":
                ndlite_part(name, args.steps, n, args.blas_one)
            elif not args.skip_torch:
                torch_part(name, args.steps)  # (its threads: OMP_NUM_THREADS, pin_threads)
        print(f"  ({time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
