"""ndlite's host time per training step, where the backend's work is tiny (issue 15 item 3).

On a GPU the seed CNN and ResNet-18 steps are host-bound: what counts is the Python time the
core spends around each backend call (tensor creation, dispatch, graph recording, the
backward engine, Module calls, the optimizer's loops). This measures it on the NumPy backend
with small shapes, so that the backend's own work is small and the figures carry over to
GPUs:

- seed_cnn: ndlite.nn.models.mnist_cnn, batch 2 of 1x28x28, RMSprop lr 1e-3, nll_loss;
- resnet18: ResNet-18 for CIFAR (bench/models_torch.py), batch 2 of 3x8x8 (batch 1 would
  leave one value per channel for the last BatchNorm, an error in training as in PyTorch),
  SGD lr 0.01 momentum 0.9, cross_entropy.

A step is zero_grad, forward, loss, backward, optimizer.step (as bench/gpu_models.py times
it). For each model it prints and records: the step's time (the minimum over `--repeats`
blocks of `--steps` steps, robust to a busy shared machine), the backend calls per step
(bench/common.timing_calls counts the outermost calls of the backend's contract), the time
spent inside them, and the core's time around them (a block's wall time less the time
inside the backend, in the same block, divided by the calls: it includes the counting
wrapper's own cost, under a microsecond a call). It also
records a fingerprint of the results (the losses and a hash of every parameter after the
timed steps, from a fixed seed) so that two checkouts can be shown to compute bitwise the
same thing.

    OPENBLAS_NUM_THREADS=1 python bench/step_overhead.py [--json NAME] [--profile seed_cnn]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (puts ndlite on sys.path)
from models_torch import resnet18_cifar  # noqa: E402

import ndlite  # noqa: E402


def make_step(name: str, b):
    """(step function, model) for `name` on backend b, its data fixed (seeded)."""
    rng = np.random.default_rng(0)
    ndlite.manual_seed(0)
    F = ndlite.nn.functional
    if name == "seed_cnn":
        model = ndlite.nn.models.mnist_cnn().to(b)
        opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)
        shape, loss_fn = (2, 1, 28, 28), F.nll_loss
    else:
        model = resnet18_cifar(ndlite.nn).to(b)
        opt = ndlite.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        shape, loss_fn = (2, 3, 8, 8), F.cross_entropy
    x = ndlite.tensor(rng.standard_normal(shape, dtype=np.float32), backend=b)
    y = ndlite.tensor(rng.integers(0, 10, shape[0]), backend=b)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, model


def fingerprint(model, losses) -> str:
    """A hash of the losses' bits and every parameter's and buffer's bytes."""
    h = hashlib.sha256(np.asarray(losses, dtype=np.float32).tobytes())
    for _, t in [*model.named_parameters(), *model.named_buffers()]:
        h.update(np.ascontiguousarray(t.detach().numpy()).tobytes())
    return h.hexdigest()[:16]


def measure(name: str, b, steps: int, repeats: int) -> dict:
    step, model = make_step(name, b)
    losses = [step().item() for _ in range(3)]  # warm-up, and the start of the fingerprint
    blocks = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        blocks.append((time.perf_counter() - t0) / steps)
    losses.append(step().item())
    fp = fingerprint(model, losses)
    inside, calls = [], [0]

    def record(_name, begun, ended):
        inside.append(ended - begun)
        calls[0] += 1

    backend_s, core_s = [], []
    for _ in range(repeats):  # inside the backend and around it, per block of steps
        inside.clear()
        calls[0] = 0
        with common.timing_calls(b, time.perf_counter, time.perf_counter, record):
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            wall = time.perf_counter() - t0
        backend_s.append(sum(inside) / steps)
        core_s.append((wall - sum(inside)) / steps)
    step_s, backend, core = min(blocks), min(backend_s), min(core_s)
    per_step = calls[0] / steps
    return {"step_us": round(step_s * 1e6, 1), "calls_per_step": per_step,
            "backend_us": round(backend * 1e6, 1),
            "core_us": round(core * 1e6, 1), "core_us_per_call": round(core / per_step * 1e6, 2),
            "fingerprint": fp}


def profile(name: str, b, steps: int, top: int) -> None:
    step, _ = make_step(name, b)
    for _ in range(3):
        step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--models", default="seed_cnn,resnet18")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", help="write bench/results/<JSON>.json")
    parser.add_argument("--profile", help="a model: print its cProfile table instead")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    b = ndlite.get_backend(args.backend)
    if args.profile:
        profile(args.profile, b, args.steps, args.top)
        return
    rows = {}
    for name in args.models.split(","):
        rows[name] = row = measure(name, b, args.steps, args.repeats)
        print(f"{name:9s} {row['step_us'] / 1e3:8.3f} ms/step  {row['calls_per_step']:6.1f} "
              f"calls/step  backend {row['backend_us'] / 1e3:7.3f} ms  core "
              f"{row['core_us_per_call']:6.2f} us/call  [{row['fingerprint']}]")
    if args.json:
        path = common.save(args.json, {"backend": args.backend, "steps": args.steps,
                                       "repeats": args.repeats, "models": rows})
        print(f"wrote {path}")
    else:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
