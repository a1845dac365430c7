"""Shared pieces of the benchmarks: thread pinning, a timer, machine info, JSON results.

Every benchmark prints what it compares, where, and the ratio; raw timings go to
bench/results/<name>.json together with the machine they were measured on (CPU model, core and
thread counts, library versions: ndlite.benchmark.machine_info). A partial run (PyTorch
missing for the comparison, a backend unavailable) never overwrites a committed result: it
goes to bench/results/<name>.partial.json (not committed), saying what is missing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]
if str(ROOT) not in sys.path:  # a source checkout: ndlite and its backends without installing
    sys.path[:0] = [str(ROOT), str(ROOT / "backends")]


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


@contextmanager
def timing_calls(backend, start, stop, record):
    """Inside the block, each outermost call of the backend's contract (its primitives and
    fast paths: a call made inside another is counted there) runs between `start()` and
    `stop()`, and `record(name, begun, ended)` gets the two readings; the backend's methods
    are as they were afterwards (bench/gpt_profile.py, bench/host_profile.py)."""
    from ndlite.device.protocol import DERIVED, FAST_PATHS, REQUIRED

    names = [n for n in REQUIRED + DERIVED + FAST_PATHS if callable(getattr(backend, n, None))]
    saved = {n: backend.__dict__.get(n) for n in names}
    depth = [0]

    def timed(name, fn):
        def call(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            begun = start()
            try:
                return fn(*args, **kwargs)
            finally:
                record(name, begun, stop())
                depth[0] -= 1
        return call

    for n in names:
        setattr(backend, n, timed(n, getattr(backend, n)))
    try:
        yield
    finally:
        restore(backend, saved)


def restore(backend, saved: dict) -> None:
    """Put back methods wrapped on the backend instance: `saved` maps each name to what the
    instance's __dict__ held before (None: nothing, the class's method)."""
    for n, fn in saved.items():
        if fn is None:
            del backend.__dict__[n]
        else:
            setattr(backend, n, fn)


def step_pace(backend, step, n: int) -> tuple[float, float]:
    """Seconds a step over n back-to-back steps: (wall time to the device's end, the host's
    pace before the final synchronize)."""
    backend.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        step()
    host = time.perf_counter() - start
    backend.synchronize()
    return (time.perf_counter() - start) / n, host / n


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


def opencl_kernel_seconds(b, fn, repeats: int) -> float:
    """Median over `repeats` runs of fn() of the summed profiling-event times of the kernels it
    queues on OpenCL backend b (NDLITE_OPENCL_PROFILE=1), after one warm-up run."""
    events = []
    enqueue = b.enqueue

    def recording(kernel, *args, **kwargs):
        event = enqueue(kernel, *args, **kwargs)
        events.append(event)
        return event

    fn()
    b.synchronize()
    times = []
    b.enqueue = recording
    try:
        for _ in range(repeats):
            events.clear()
            fn()
            b.synchronize()
            times.append(sum(e.profile.end - e.profile.start for e in events) * 1e-9)
    finally:
        b.enqueue = enqueue
    return statistics.median(times)


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


def machine_info() -> dict:
    """Where a result was measured: CPU model, core and thread counts, library versions."""
    from ndlite.benchmark import machine_info as info

    return info()


def with_machine(report: dict) -> dict:
    """`report` with the machine it was measured on, for scripts that write their own JSON."""
    return {"machine_host": machine_info(), **report}


def result_path(name: str, complete: bool = True) -> Path:
    """bench/results/<name>.json, or <name>.partial.json for a partial run; `name` may end in
    .json (--out x.json writes x.json, not x.json.json) or be a path of its own."""
    name = name.removesuffix(".json")
    base = Path(name) if os.sep in name else RESULTS / name
    return base.with_name(base.name + ("" if complete else ".partial") + ".json")


def save(name: str, payload: dict, missing: dict | None = None) -> Path:
    """Write a result with the machine it ran on; a run with `missing` parts is partial."""
    path = result_path(name, complete=not missing)
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine_info(), "complete": not missing, "missing": missing or {},
              **payload}
    path.write_text(json.dumps(report, indent=2) + "\n")
    if missing:
        say_partial(path, missing)
    return path


def keep(report: Path, name: str) -> Path:
    """Move a JSON report that `ndlite bench ... --json report` wrote to its place in
    bench/results: <name>.json when complete, <name>.partial.json otherwise."""
    data = json.loads(report.read_text())
    path = result_path(name, complete=data.get("complete", True))
    path.parent.mkdir(parents=True, exist_ok=True)
    report.replace(path)
    if not data.get("complete", True):
        say_partial(path, data.get("missing", {}))
    else:
        print(f"kept {path}")
    return path


def say_partial(path: Path, missing: dict) -> None:
    print(f"\nPARTIAL RUN, so the committed {path.name.replace('.partial', '')} is left as it "
          f"was; this run went to {path}. Missing:", file=sys.stderr)
    for what, why in missing.items():
        print(f"  {what}: {why}", file=sys.stderr)


def run_cli(benchmark: str, name: str, argv: list[str]) -> int:
    """Run `ndlite bench <benchmark> *argv`, then keep its JSON as bench/results/<name>."""
    from ndlite.cli import main

    report = RESULTS / f".{name}.running.json"
    code = main(["bench", benchmark, *argv, "--json", str(report)])
    if code == 0:
        keep(report, name)
    return code
