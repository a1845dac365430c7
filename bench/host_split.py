"""Where a GPU training step's host time goes: the seed CNN (or another model of
bench/host_profile.py) on a backend, in rounds that interleave five measures, so that a host
whose speed drifts (the H100 machines' does, by tens of percent within minutes) moves them
together:

- step: steps with `loss.item()`, back to back (a host-bound step: the host's pace);
- step, gc off: the same with Python's garbage collector disabled;
- in-step calls: the time inside the backend's outermost calls during steps (each call timed
  where the step makes it, its code and data cold as they are in a step), per call too;
- core: the step with every backend call answered from a tape recorded in one real step: the
  core's own time (autograd, dispatch, Modules, the optimizer's Python side);
- gc: collections and their time during the steps.

    python bench/host_split.py [--backend cupy] [--model seed_cnn] [--steps 200] [--rounds 5]
        [--torch]   (import PyTorch first: its heap, as bench/gpu_models.py has it)
"""

from __future__ import annotations

import argparse
import collections
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (puts ndlite on sys.path)
import host_profile  # noqa: E402

import ndlite  # noqa: E402
from ndlite.device.protocol import DERIVED, FAST_PATHS, REQUIRED  # noqa: E402


def wrap_calls(b, make):
    """Each outermost backend call through make(name, fn); restores the backend after."""
    names = [n for n in REQUIRED + DERIVED + FAST_PATHS if callable(getattr(b, n, None))]
    saved = {n: b.__dict__.get(n) for n in names}
    depth = [0]
    for n in names:
        fn, inner = getattr(b, n), make(n, getattr(b, n))

        def call(*args, _fn=fn, _inner=inner, **kwargs):
            if depth[0]:
                return _fn(*args, **kwargs)
            depth[0] += 1
            try:
                return _inner(*args, **kwargs)
            finally:
                depth[0] -= 1
        setattr(b, n, call)
    return lambda: common.restore(b, saved)


def pace(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cupy")
    parser.add_argument("--model", choices=["seed_cnn", "vgg", "resnet18"], default="seed_cnn")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--torch", action="store_true")
    args = parser.parse_args()
    if args.torch:
        import torch  # noqa: F401
    b = ndlite.get_backend(args.backend)
    step = host_profile.model_step(b, args.model)
    for _ in range(30):
        step().item()
    tape = []

    def record(name, fn):
        return lambda *a, **k: tape.append(fn(*a, **k)) or tape[-1]

    restore = wrap_calls(b, record)
    step().item()
    restore()
    calls, at = [], [0]

    def timed(name, fn):
        def call(*a, **k):
            begun = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                calls.append((name, time.perf_counter() - begun))
        return call

    def replay(name, fn):
        def call(*a, **k):
            at[0] += 1
            return tape[at[0] - 1]
        return call

    def core_step():
        at[0] = 0
        step()

    collected, begun = [0, 0.0], [0.0]

    def on_gc(phase, info):
        if phase == "start":
            begun[0] = time.perf_counter()
        else:
            collected[0] += 1
            collected[1] += time.perf_counter() - begun[0]

    gc.callbacks.append(on_gc)
    n, rows = args.steps, collections.defaultdict(list)
    per_call = collections.defaultdict(float)
    for _ in range(args.rounds):
        collected[:] = [0, 0.0]
        rows["step with loss.item() (us)"].append(pace(lambda: step().item(), n))
        rows["gc collections per step"].append(collected[0] / n)
        rows["gc time per step (us)"].append(collected[1] / n * 1e6)
        gc.disable()
        rows["step, gc off (us)"].append(pace(lambda: step().item(), n))
        gc.enable()
        calls.clear()
        restore = wrap_calls(b, timed)
        pace(lambda: step().item(), n)
        restore()
        rows["in-step backend calls (us)"].append(sum(t for _, t in calls) / n * 1e6)
        k = len(calls) // n
        for i, (name, t) in enumerate(calls):
            per_call[(i % k, name)] += t / (n * args.rounds) * 1e6
        restore = wrap_calls(b, replay)
        rows["core alone (us)"].append(pace(core_step, n))
        restore()
    gc.callbacks.remove(on_gc)
    print(f"{args.model} on {b.name} ({b.device_name()}): {len(tape)} backend calls a step; "
          f"medians of {args.rounds} rounds of {n} steps (each round's value in brackets)")
    for name, values in rows.items():
        print(f"  {name:30s} {statistics.median(values):9.1f}  "
              f"{[round(v, 1) for v in values]}")
    print("in-step time of each call (us, mean over the rounds):")
    for (i, name), us in sorted(per_call.items()):
        print(f"  {i:3d} {name:24s} {us:8.1f}")


if __name__ == "__main__":
    main()
