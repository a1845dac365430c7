"""Where a GPU starts to pay: a Linear layer's forward + backward at batch 4, on every backend.

Tiny layers run faster on the CPU because every GPU kernel launch costs microseconds of host
work; large ones run faster on the GPU. This measures the crossover instead of guessing it:
one bias-free Linear (n -> n) with a gradient for W, at batch 4, for growing n, on each
available backend, timed as a user sees it (wall clock over many steps, then a synchronize:
the host's launch cost is the point).

    python bench/crossover.py [--sizes 5 50 500 2000 8000] [--backends numpy cupy opencl:gpu]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save  # noqa: E402


def step_time(ndlite, backend, n: int, batch: int, budget: float) -> float:
    """Median seconds per forward+backward step (each run ends with a synchronize)."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = ndlite.tensor(rng.standard_normal((batch, n)).astype(np.float32), backend=backend)
    w = ndlite.tensor((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
                      backend=backend, requires_grad=True)
    g = ndlite.tensor(rng.standard_normal((batch, n)).astype(np.float32), backend=backend)
    linear = ndlite.nn.functional.linear

    def step():
        w.grad = None
        linear(x, w).backward(g)

    for _ in range(5):
        step()
    ndlite.synchronize(backend)
    start = time.perf_counter()
    count = 0
    while time.perf_counter() - start < budget / 4 or count < 3:
        step()
        count += 1
    ndlite.synchronize(backend)
    per_step = (time.perf_counter() - start) / count
    number = max(3, int(budget / 5 / per_step))
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            step()
        ndlite.synchronize(backend)
        runs.append((time.perf_counter() - start) / number)
    return sorted(runs)[2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 50, 500, 2000, 8000])
    parser.add_argument("--backends", nargs="+", default=["numpy", "cupy", "opencl:gpu"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--out", default="crossover")
    args = parser.parse_args(argv)

    import ndlite

    backends = {}
    for spec in args.backends:
        backend, why = ndlite.device.probe(spec)
        if backend is None:
            print(f"skipping {spec}: {why}")
        else:
            backends[spec] = backend
    table = {}
    print(f"Linear forward+backward at batch {args.batch}, microseconds per step (median)")
    print(f"{'neurons':>8s}" + "".join(f"{b:>14s}" for b in backends) + "   fastest")
    for n in args.sizes:
        row = {spec: step_time(ndlite, b, n, args.batch, args.budget) * 1e6
               for spec, b in backends.items()}
        table[n] = row
        fastest = min(row, key=row.get)
        print(f"{n:8d}" + "".join(f"{row[b]:14.1f}" for b in backends) + f"   {fastest}")
    crossover = {}
    for spec in backends:
        if spec == "numpy":
            continue
        wins = [n for n in args.sizes if table[n][spec] < table[n]["numpy"]]
        crossover[spec] = min(wins) if wins else None
        print(f"{spec} beats numpy from {crossover[spec]} neurons on" if wins else
              f"{spec} never beats numpy here")
    devices = {spec: b.device_name() for spec, b in backends.items()}
    path = save(args.out, {"batch": args.batch, "unit": "microseconds per step",
                           "devices": devices, "steps": {str(k): v for k, v in table.items()},
                           "first_size_where_faster_than_numpy": crossover})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
