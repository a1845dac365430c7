"""Per-op overhead on tiny tensors and bandwidth on 2^26 floats: ndlite's OpenCL backend vs
raw CuPy on the same GPU (where CuPy is there), both as backend primitives.

- overhead: wall-clock per call of add on two 8-element float32 buffers, many calls queued,
  then one wait (what a training loop of small ops pays);
- bandwidth: add (3 x 4 bytes per element), relu (2 x 4), sum of everything and row sums of
  1024 contiguous elements (4 bytes per element) and a device-to-device copy (2 x 4 bytes per
  element, the reference ceiling) on 2^26 float32, GB/s over the median of several runs.

    python bench/opencl_ops.py --backend opencl:gpu --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import with_machine  # noqa: E402

N_BIG = int(__import__("os").environ.get("NDLITE_BENCH_N", 2**26))


def _per_call(fn, sync, calls: int) -> float:
    fn()
    sync()
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - started) / calls


def _median_seconds(fn, sync, repeats: int = 10) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure_opencl(spec: str) -> dict:
    import pyopencl as cl

    import ndlite

    b = ndlite.get_backend(spec)
    tiny_a, tiny_b = (b.from_numpy(np.ones(8, np.float32)) for _ in range(2))
    big = np.random.default_rng(0).standard_normal(N_BIG, dtype=np.float32)
    x, y = b.from_numpy(big), b.from_numpy(big)
    out = b.empty((N_BIG,), np.dtype("float32"))
    copy = lambda: cl.enqueue_copy(b.queue, out.data, x.data, byte_count=4 * N_BIG)  # noqa: E731
    return {
        "device": b.device_name(),
        "add_tiny_us": 1e6 * _per_call(lambda: b.add(tiny_a, tiny_b), b.synchronize, 2000),
        "add_GBps": 12 * N_BIG / _median_seconds(lambda: b.add(x, y), b.synchronize) / 1e9,
        "relu_GBps": 8 * N_BIG / _median_seconds(lambda: b.relu(x), b.synchronize) / 1e9,
        "sum_GBps": 4 * N_BIG / _median_seconds(lambda: b.sum(x, (0,), False),
                                                b.synchronize) / 1e9,
        "row_sum_GBps": 4 * N_BIG / _median_seconds(
            lambda: b.sum(b.reshape(x, (N_BIG // 1024, 1024)), (1,), False),
            b.synchronize) / 1e9,
        "copy_GBps": 8 * N_BIG / _median_seconds(copy, b.synchronize) / 1e9,
    }


def measure_cupy() -> dict | None:
    try:
        import cupy as cp
    except ImportError:
        return None
    sync = cp.cuda.Device().synchronize
    tiny_a, tiny_b = cp.ones(8, cp.float32), cp.ones(8, cp.float32)
    x = cp.random.standard_normal(N_BIG, dtype=cp.float32)
    y = x.copy()
    out = cp.empty_like(x)
    return {
        "add_tiny_us": 1e6 * _per_call(lambda: cp.add(tiny_a, tiny_b), sync, 2000),
        "add_GBps": 12 * N_BIG / _median_seconds(lambda: cp.add(x, y), sync) / 1e9,
        "relu_GBps": 8 * N_BIG / _median_seconds(lambda: cp.maximum(x, 0), sync) / 1e9,
        "sum_GBps": 4 * N_BIG / _median_seconds(lambda: x.sum(), sync) / 1e9,
        "row_sum_GBps": 4 * N_BIG / _median_seconds(
            lambda: x.reshape(N_BIG // 1024, 1024).sum(axis=1), sync) / 1e9,
        "copy_GBps": 8 * N_BIG / _median_seconds(lambda: out.__setitem__(Ellipsis, x),
                                                 sync) / 1e9,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="opencl:gpu")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    report = {"opencl": measure_opencl(args.backend), "cupy": measure_cupy()}
    o, c = report["opencl"], report["cupy"]
    print(f"ops on {o['device']} ({args.backend}):")
    print(f"  {'':12s} {'ndlite OpenCL':>14s} {'raw CuPy':>10s}")
    for key, unit in (("add_tiny_us", "us/call"), ("add_GBps", "GB/s"), ("relu_GBps", "GB/s"),
                      ("sum_GBps", "GB/s"), ("row_sum_GBps", "GB/s"), ("copy_GBps", "GB/s")):
        cupy = f"{c[key]:10.1f}" if c else f"{'-':>10s}"
        print(f"  {key:12s} {o[key]:14.1f} {cupy}  {unit}")
    print("  of copy bandwidth: " + ", ".join(
        f"{k[:-5]} {o[k] / o['copy_GBps']:.2f}" for k in ("add_GBps", "relu_GBps", "sum_GBps",
                                                         "row_sum_GBps")))
    if c:
        print(f"  tiny-op overhead OpenCL / CuPy: {o['add_tiny_us'] / c['add_tiny_us']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(with_machine(report), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
