"""Shared pieces of the benchmarks: thread pinning, a timer, machine info, JSON results.

Every benchmark prints what it compares, where, and the ratio; raw timings go to
bench/results/<name>.json together with the machine they were measured on.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def pin_threads(n: int | None) -> int:
    """Limit BLAS/OpenMP threads (call before importing numpy or torch); returns the count."""
    n = n or os.cpu_count() or 1
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    return n


def timed_steps(batches, model, opt, nll_loss, to_device) -> float:
    """Seconds for one training step per batch, each from a host batch to `loss.item()` as
    `ndlite train` does; works for ndlite and PyTorch alike (to_device makes a tensor)."""
    start = time.perf_counter()
    for x, y in batches:
        x, y = to_device(x), to_device(y)
        opt.zero_grad()
        loss = nll_loss(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
    return time.perf_counter() - start


def median_time(fn, number: int, repeat: int = 15, warmup: int = 1) -> float:
    """The median over `repeat` runs of the mean time of one call (seconds), after warm-up."""
    for _ in range(warmup):
        for _ in range(max(number // 10, 1)):
            fn()
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def cuda_time_ms(fn, warmup: int = 3, repeats: int = 15, inner: int = 20) -> list[float]:
    """Milliseconds per call of fn, one figure per repeat, from CUDA events around `inner`
    back-to-back calls after warm-up (the GPU's timeline: launch-bound calls measure the
    host's pace). Needs CuPy."""
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / inner)
    return times


def torch_seed_cnn():
    """PyTorch's twin of `ndlite.nn.models.mnist_cnn` (the seed network), seeded with 0, on
    the CPU. Needs PyTorch."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3), nn.ReLU(), nn.Flatten(),
        nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 10), nn.LogSoftmax(dim=1))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    info = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
    }
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine_info(), **payload}, indent=2) + "\n")
    return path
