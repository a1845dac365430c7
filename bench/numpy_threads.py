"""How the NumPy backend's own threads pay: the seed CNN's training step (random batches of
128) with 1, 2, 4, ... threads of ndlite's, BLAS left at the machine's thread count, and a
skinny product that the backend leaves to BLAS's threads.

    python bench/numpy_threads.py [--threads 1 2 4 8] [--steps 20] [--out numpy_threads]

"1" is the backend with its threads off (only BLAS threaded). The cap `MAX_THREADS` in
backends/ndlite_numpy/threads.py comes from this run on a 16-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time, save, timed_steps  # noqa: E402


def step_ms(threads: int, steps: int) -> float:
    import ndlite_numpy.threads as own
    import numpy as np

    import ndlite
    from ndlite.nn import functional as F

    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((128, 1, 28, 28), dtype=np.float32),
                rng.integers(0, 10, 128)) for _ in range(steps + 5)]
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn()
    opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)
    with own.forced(threads):
        times = [timed_steps([batch], model, opt, F.nll_loss, ndlite.tensor) for batch in batches]
    return statistics.median(times[5:]) * 1e3  # after warm-up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default="numpy_threads")
    args = parser.parse_args()

    import ndlite_numpy.threads as own
    import numpy as np

    print(f"seed CNN step, batch 128, median of {args.steps} (BLAS threads: "
          f"{[c.num_threads for c in own._controllers()]}, own threads now: {own.count()})")
    steps = {}
    for n in args.threads:
        steps[n] = step_ms(n, args.steps)
        print(f"  {n:3d} thread(s) of ndlite's: {steps[n]:7.1f} ms", flush=True)

    rng = np.random.default_rng(0)
    w = rng.standard_normal((2000, 2000), dtype=np.float32)
    x = rng.standard_normal((2000, 4), dtype=np.float32)
    skinny = {"blas": median_time(lambda: np.matmul(w, x), 50) * 1e6}
    own_split = own.SKINNY
    own.SKINNY = 0  # force the split, to show why skinny products are left to BLAS
    try:
        for n in args.threads[1:]:
            with own.forced(n):
                skinny[f"{n} pieces"] = median_time(lambda: own.matmul(w, x), 50) * 1e6
    finally:
        own.SKINNY = own_split
    print("2000x2000 @ 2000x4, microseconds: "
          + ", ".join(f"{k} {v:.0f}" for k, v in skinny.items()))
    print(f"wrote {save(args.out, {'step_ms': steps, 'skinny_matmul_us': skinny})}")


if __name__ == "__main__":
    main()
