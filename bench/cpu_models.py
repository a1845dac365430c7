"""ndlite's NumPy backend against PyTorch CPU at equal threads, on the models of issue 20: the
seed CNN (batch 128, RMSprop), a VGG-style CIFAR net (3x32x32, 32-64-128 channels, 3x3
convolutions with BatchNorm, batch 32, SGD), an MLP 784-1024-1024-10 (batch 256, Adam) and a
tiny MLP 32-64-64-10 (batch 32, Adam).

    python bench/cpu_models.py --threads 16 [--steps 30] [--models vgg mlp] [--out NAME]

Training steps of the two frameworks alternate in one process (ndlite, torch, ndlite, ...), so
that a busy machine slows both alike; the figure is the median of the per-step ratios
ndlite / torch, after warm-up. With --block K each framework runs K steps in turn and the first
of each block is not timed (the other's BLAS / OpenMP threads may still spin then); the ratio
is then per round, of the medians of the timed steps. Raw step times go to bench/results/<out>.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pin_threads, save  # noqa: E402

TARGETS = {"seed_cnn": 1.5, "vgg": 1.5, "mlp": 1.2, "tiny_mlp": 1.0}  # 16 threads (issue 20)
SHAPES = {"seed_cnn": ((128, 1, 28, 28), 10), "vgg": ((32, 3, 32, 32), 10),
          "mlp": ((256, 784), 10), "tiny_mlp": ((32, 32), 10)}


def layers(nn, name: str) -> list:
    """The model as a list of layers, written once for both frameworks (same module names)."""
    if name == "seed_cnn":
        return [nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5), nn.ReLU(),
                nn.MaxPool2d(2), nn.Conv2d(64, 128, 3), nn.ReLU(), nn.Flatten(),
                nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 10), nn.LogSoftmax(dim=1)]
    if name == "vgg":
        out, c = [], 3
        for width in (32, 64, 128):
            for _ in range(2):
                out += [nn.Conv2d(c, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
                c = width
            out.append(nn.MaxPool2d(2))
        return out + [nn.Flatten(), nn.Linear(128 * 4 * 4, 10), nn.LogSoftmax(dim=1)]
    sizes = (784, 1024, 1024, 10) if name == "mlp" else (32, 64, 64, 10)
    out = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        out += [nn.Linear(a, b), nn.ReLU()]
    return out[:-1] + [nn.LogSoftmax(dim=1)]


def optimizer(optim, name: str, params):
    if name == "seed_cnn":
        return optim.RMSprop(params, lr=1e-3)
    if name == "vgg":
        return optim.SGD(params, lr=0.01, momentum=0.9)
    return optim.Adam(params, lr=1e-3)


def make_step(framework: str, name: str):
    """A function (x, y) -> seconds for one training step, host batch to loss.item()."""
    if framework == "torch":
        import torch as fw
        from torch import nn, optim
        from torch.nn import functional as F

        fw.manual_seed(0)
        to = fw.from_numpy
    else:
        import ndlite as fw
        from ndlite import nn, optim
        from ndlite.nn import functional as F

        fw.manual_seed(0)
        to = fw.tensor
    model = nn.Sequential(*layers(nn, name))
    opt = optimizer(optim, name, model.parameters())

    def step(x, y) -> float:
        start = time.perf_counter()
        x, y = to(x), to(y)
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        return time.perf_counter() - start

    return step


def compare(name: str, steps: int, warmup: int, block: int) -> dict:
    import numpy as np

    rng = np.random.default_rng(0)
    shape, classes = SHAPES[name]
    batches = [(rng.standard_normal(shape, dtype=np.float32),
                rng.integers(0, classes, shape[0])) for _ in range(4)]
    ours, theirs = make_step("ndlite", name), make_step("torch", name)
    times = {"ndlite": [], "torch": []}
    ratios = []
    for i in range(warmup + steps):
        # `block` steps of each in turn, the first of a block not timed: the other's threads
        # may still be spinning then (OpenBLAS's and OpenMP's wait busily after their work)
        pair = []
        for step in (ours, theirs):
            for j in range(block):
                x, y = batches[(i * block + j) % len(batches)]
                seconds = step(x, y)
                if i >= warmup and (j or block == 1):
                    times["ndlite" if step is ours else "torch"].append(seconds)
                    pair.append(seconds)
        if i >= warmup:
            half = len(pair) // 2
            ratios.append(statistics.median(pair[:half]) / statistics.median(pair[half:]))
    return {"ratio_median": statistics.median(ratios),
            "ndlite_median_ms": statistics.median(times["ndlite"]) * 1e3,
            "torch_median_ms": statistics.median(times["torch"]) * 1e3,
            "step_seconds": times}


def _blas_kernels() -> dict:
    """Which kernels OpenBLAS runs (its architecture, and OPENBLAS_CORETYPE where set): on the
    2-core VM the environment forces Haswell's AVX2 kernels on an AVX-512 CPU, which decides
    most of the convolutions' time (docs/DESIGN.md)."""
    from threadpoolctl import threadpool_info

    return {"architecture": [i.get("architecture") for i in threadpool_info()
                             if i.get("internal_api") == "openblas"],
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=list(SHAPES))
    parser.add_argument("--block", type=int, default=1,
                        help="steps of each framework in turn (1: strict alternation)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    threads = pin_threads(args.threads)

    import torch
    from ndlite_numpy import kernels
    from ndlite_numpy import threads as own

    import ndlite

    torch.set_num_threads(threads)
    ndlite.set_backend("numpy")
    backend_info = ndlite.get_backend().info()
    print(f"ndlite (numpy) / torch {torch.__version__} CPU, {threads} thread(s), median of "
          f"{args.steps} per-step ratios (block {args.block}); ndlite threads {own.count()}, "
          f"compiled kernels: {kernels.status()}")
    results = {}
    for name in args.models:
        r = compare(name, args.steps, args.warmup, args.block)
        results[name] = r
        print(f"  {name:9s} ndlite {r['ndlite_median_ms']:8.2f} ms  torch "
              f"{r['torch_median_ms']:8.2f} ms  ratio {r['ratio_median']:.2f}", flush=True)
    out = args.out or f"cpu_models_{threads}threads"
    payload = {"threads": threads, "block": args.block, "backend_info": backend_info,
               "blas_kernels": _blas_kernels(), **results}
    print(f"wrote {save(out, payload)}")


if __name__ == "__main__":
    main()
