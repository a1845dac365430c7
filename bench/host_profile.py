"""Where a training step's time goes, per backend call: the seed CNN (batch 128, RMSprop), the
VGG-style net of bench/cpu_models.py (batch 32, SGD momentum) or ResNet-18-CIFAR (batch 128, SGD
momentum) on a backend. It prints the
step's wall time with `loss.item()` and the host's pace without it (on a GPU backend a step
that waits for nothing shows the host's pace), then the time and count of each backend
primitive or fast path per step (the outermost call only, its wall time: on a GPU backend,
host time for calls that queue work), then a cProfile table (issue 15 item 3, issue 20).

    python bench/host_profile.py [--backend cupy] [--model seed_cnn|vgg|resnet18] [--steps 200]
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
import common  # noqa: E402  (puts ndlite on sys.path)

import ndlite  # noqa: E402


def per_call(backend, step, steps: int) -> tuple[collections.Counter, collections.Counter]:
    """(seconds, calls) per primitive over `steps` steps, outermost calls only."""
    spent, counts = collections.Counter(), collections.Counter()

    def record(name, begun, ended):
        spent[name] += ended - begun
        counts[name] += 1

    with common.timing_calls(backend, time.perf_counter, time.perf_counter, record):
        for _ in range(steps):
            step()
    return spent, counts


def model_step(b, name: str):
    """The step of `name` on backend b, its data fixed (random, seeded)."""
    rng = np.random.default_rng(0)
    ndlite.manual_seed(0)
    if name == "vgg":
        from cpu_models import layers

        model = ndlite.nn.Sequential(*layers(ndlite.nn, "vgg")).to(b)
        opt = ndlite.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        shape = (32, 3, 32, 32)
    elif name == "resnet18":
        from models_torch import resnet18_cifar

        model = resnet18_cifar(ndlite.nn).to(b)
        opt = ndlite.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        shape = (128, 3, 32, 32)
    else:
        model = ndlite.nn.models.mnist_cnn().to(b)
        opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)
        shape = (128, 1, 28, 28)
    x = rng.standard_normal(shape, dtype=np.float32)
    y = rng.integers(0, 10, shape[0])

    def step():
        opt.zero_grad()
        loss = ndlite.nn.functional.nll_loss(model(ndlite.tensor(x, backend=b)),
                                             ndlite.tensor(y, backend=b))
        loss.backward()
        opt.step()
        return loss

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cupy")
    parser.add_argument("--model", choices=["seed_cnn", "vgg", "resnet18"], default="seed_cnn")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    b = ndlite.get_backend(args.backend)
    step = model_step(b, args.model)
    for _ in range(max(3, args.steps // 10)):
        step().item()
    b.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step().item()
    synced = (time.perf_counter() - t0) / args.steps * 1e3
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    host = (time.perf_counter() - t0) / args.steps * 1e3
    b.synchronize()
    spent, counts = per_call(b, lambda: step().item(), args.steps)
    n = args.steps
    print(f"{args.model} on {b.name} ({b.device_name()}): step {synced:.3f} ms with "
          f"loss.item(), {host:.3f} ms host pace without; {sum(counts.values()) / n:.0f} backend "
          f"calls per step taking {sum(spent.values()) / n * 1e3:.2f} ms")
    for name, seconds in spent.most_common(20):
        print(f"  {name:24s} {seconds / n * 1e3:8.3f} ms  {counts[name] // n:4d} calls")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps):
        step().item()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
