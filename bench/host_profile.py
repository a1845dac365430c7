"""Where the host time of a launch-bound training step goes: the seed CNN (batch 128, RMSprop)
on a backend, timed on the wall with and without the GPU's work (a step that waits for nothing
shows the host's pace), then profiled with cProfile over --steps steps: the functions with the
most time of their own, and how many backend primitives one step calls (issue 15, item 3).

    python bench/host_profile.py [--backend cupy] [--steps 200] [--top 30]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402,F401  (puts ndlite on sys.path)

import ndlite  # noqa: E402
from ndlite.device.protocol import DERIVED, FAST_PATHS, REQUIRED  # noqa: E402


def count_calls(backend, step, batch) -> collections.Counter:
    """How many times one step calls each of the backend's primitives and fast paths."""
    counts = collections.Counter()
    names = [n for n in REQUIRED + DERIVED + FAST_PATHS if callable(getattr(backend, n, None))]
    saved = {n: backend.__dict__.get(n) for n in names}

    def counting(name, fn):
        def call(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return call

    for n in names:
        setattr(backend, n, counting(n, getattr(backend, n)))
    try:
        step(*batch)
    finally:
        for n, fn in saved.items():
            if fn is None:
                del backend.__dict__[n]
            else:
                setattr(backend, n, fn)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cupy")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    b = ndlite.get_backend(args.backend)
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(b)
    opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 128)

    def step(x, y):
        opt.zero_grad()
        loss = ndlite.nn.functional.nll_loss(model(ndlite.tensor(x, backend=b)),
                                             ndlite.tensor(y, backend=b))
        loss.backward()
        opt.step()
        return loss

    for _ in range(20):
        step(x, y).item()
    b.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step(x, y).item()
    synced = (time.perf_counter() - t0) / args.steps * 1e3
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step(x, y)
    host = (time.perf_counter() - t0) / args.steps * 1e3
    b.synchronize()
    counts = count_calls(b, step, (x, y))
    print(f"{b.name} ({b.device_name()}): step {synced:.3f} ms with loss.item(), "
          f"{host:.3f} ms host pace without; {sum(counts.values())} backend calls per step")
    print("calls per step:", dict(counts.most_common()))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps):
        step(x, y).item()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
