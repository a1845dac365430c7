"""ndlite on CuPy against raw CuPy (and PyTorch eager where it is installed), on one GPU.

Two measurements, each timed with CUDA events after a warm-up, as medians of repeats:
- matmul 4096^3 float32, TF32 off on every side: raw CuPy's time over ndlite's (target >= 0.97);
- time per op on tiny tensors, where launching dominates: ndlite's backend primitive and its
  Tensor op over raw CuPy (target <= 1.3), with PyTorch eager alongside.

Prints what it compares, on which device, and the ratios; writes raw timings to --json.

    PYTHONPATH=. python bench/cupy_vs_raw.py --json bench/results/cupy_vs_raw.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import cupy
import numpy as np

import ndlite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cuda_time_ms, with_machine  # noqa: E402


def torch_time_ms(torch, fn, warmup: int, repeats: int, inner: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return times


def load_torch():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch


def bench_matmul(b, torch, n: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    a_host = rng.standard_normal((n, n), dtype=np.float32)
    c_host = rng.standard_normal((n, n), dtype=np.float32)
    a, c = cupy.asarray(a_host), cupy.asarray(c_host)
    ta, tc = ndlite.tensor(a_host, backend=b), ndlite.tensor(c_host, backend=b)
    runs = {"raw cupy": lambda: cupy.matmul(a, c),
            "ndlite backend": lambda: b.matmul(a, c),
            "ndlite tensor": lambda: ndlite.matmul(ta, tc)}
    times = {name: [] for name in runs}
    for _ in range(repeats):  # interleaved, so clock drift hits every side alike
        for name, fn in runs.items():
            times[name] += cuda_time_ms(fn, warmup=1, repeats=1, inner=1)
    if torch is not None:
        pa = torch.as_tensor(a, device="cuda")
        pc = torch.as_tensor(c, device="cuda")
        times["torch"] = torch_time_ms(torch, lambda: pa @ pc, 3, repeats, 1)
    reference = cupy.matmul(a.astype(cupy.float64), c.astype(cupy.float64))
    out = b.matmul(a, c).astype(cupy.float64)
    error = float(cupy.linalg.norm(out - reference) / cupy.linalg.norm(reference))
    flops = 2 * n**3
    result = {"n": n, "dtype": "float32", "relative_error_vs_float64": error, "sides": {}}
    raw = statistics.median(times["raw cupy"])
    for name, t in times.items():
        median = statistics.median(t)
        result["sides"][name] = {"median_ms": median, "tflops": flops / median / 1e9,
                                 "speed_vs_raw_cupy": raw / median, "times_ms": t}
    return result


def bench_tiny_ops(b, torch, shape: tuple, repeats: int, inner: int) -> dict:
    from ndlite_cupy.kernels import kernels

    host = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x, y = cupy.asarray(host), cupy.asarray(host[::-1].copy())
    tx, ty = ndlite.tensor(host, backend=b), ndlite.tensor(host[::-1].copy(), backend=b)
    sigmoid_kernel = kernels().sigmoid.kernel  # the very kernel ndlite launches, unwrapped
    ops = {
        "add": (lambda: cupy.add(x, y), lambda: b.add(x, y), lambda: tx + ty),
        "mul_scalar": (lambda: cupy.multiply(x, 2.0), lambda: b.mul(x, 2.0), lambda: tx * 2.0),
        "exp": (lambda: cupy.exp(x), lambda: b.exp(x), lambda: ndlite.exp(tx)),
        "relu": (lambda: cupy.maximum(x, 0.0), lambda: b.relu(x), lambda: ndlite.relu(tx)),
        "sigmoid": (lambda: sigmoid_kernel(x), lambda: b.sigmoid(x),
                    lambda: ndlite.sigmoid(tx)),
        "maximum": (lambda: cupy.maximum(x, y), lambda: b.maximum(x, y),
                    lambda: ndlite.maximum(tx, ty)),
        "sum": (lambda: x.sum(axis=(0, 1)), lambda: b.sum(x, (0, 1), False),
                lambda: ndlite.sum(tx)),
        "matmul": (lambda: cupy.matmul(x, y), lambda: b.matmul(x, y),
                   lambda: ndlite.matmul(tx, ty)),
    }
    if torch is not None:
        px = torch.as_tensor(host, device="cuda")
        py = torch.as_tensor(host[::-1].copy(), device="cuda")
        torch_ops = {"add": lambda: px + py, "mul_scalar": lambda: px * 2.0,
                     "exp": lambda: torch.exp(px), "relu": lambda: torch.relu(px),
                     "sigmoid": lambda: torch.sigmoid(px), "maximum": lambda: torch.maximum(px, py),
                     "sum": lambda: px.sum(), "matmul": lambda: px @ py}
    result = {"shape": list(shape), "dtype": "float32", "inner_calls": inner, "ops": {}}
    for name, (raw, backend, tensor) in ops.items():
        sides = {"raw cupy": cuda_time_ms(raw, 200, repeats, inner),
                 "ndlite backend": cuda_time_ms(backend, 200, repeats, inner),
                 "ndlite tensor": cuda_time_ms(tensor, 200, repeats, inner)}
        if torch is not None:
            sides["torch"] = torch_time_ms(torch, torch_ops[name], 200, repeats, inner)
        raw_median = statistics.median(sides["raw cupy"])
        result["ops"][name] = {
            side: {"median_us": 1000 * statistics.median(t),
                   "ratio_to_raw_cupy": statistics.median(t) / raw_median,
                   "times_us": [1000 * v for v in t]}
            for side, t in sides.items()
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--n", type=int, default=4096, help="matmul size (n x n x n)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--inner", type=int, default=2000, help="tiny-op calls per timing")
    args = parser.parse_args()

    b = ndlite.get_backend("cupy")
    torch = load_torch()
    info = b.info()
    print(f"ndlite on {b.name}: {info['device']} (compute capability "
          f"{info['compute_capability']}), CUDA runtime {info['cuda_runtime']}, driver "
          f"{info['cuda_driver']}, CuPy {info['cupy']}"
          + (f", PyTorch {torch.__version__}" if torch else ", no PyTorch"))
    matmul = bench_matmul(b, torch, args.n, args.repeats)
    tiny = bench_tiny_ops(b, torch, (8, 8), args.repeats, args.inner)

    print(f"\nmatmul {args.n}^3 float32 (TF32 off; relative error vs float64 "
          f"{matmul['relative_error_vs_float64']:.1e})")
    for side, r in matmul["sides"].items():
        print(f"  {side:15s} {r['median_ms']:8.3f} ms  {r['tflops']:6.1f} TFLOP/s  "
              f"speed vs raw CuPy {r['speed_vs_raw_cupy']:.3f}x")
    print("\nper-op time on tiny (8, 8) float32 tensors, microseconds (ratio to raw CuPy)")
    sides = list(next(iter(tiny["ops"].values())))
    print("  " + f"{'op':11s}" + "".join(f"{s:>24s}" for s in sides))
    for name, r in tiny["ops"].items():
        print("  " + f"{name:11s}" + "".join(
            f"{r[s]['median_us']:12.2f} ({r[s]['ratio_to_raw_cupy']:5.2f}x)  " for s in sides))
    if args.json:
        report = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "backend": b.name,
                  "machine": {**info, "python": platform.python_version(),
                              "numpy": np.__version__,
                              "torch": torch.__version__ if torch else None},
                  "matmul": matmul, "tiny_ops": tiny}
        with open(args.json, "w") as f:
            json.dump(with_machine(report), f, indent=1, default=str)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
