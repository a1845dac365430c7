"""The character GPT's matrix products (batch 64, context 256, width 384, 6 heads; forward and
both gradients, with the operand layouts the model gives them) through ndlite's OpenCL
matmul, under each of gemm.cl's tile candidates (tuning.GPU_CANDIDATES) and the tuned choice,
against cuBLAS through CuPy (TF32 off) on the same GPU. Times: the OpenCL kernels' profiling
events (the product and, split along K, the sum of its slices), CUDA events for cuBLAS;
medians after warm-up.

    NDLITE_OPENCL_PROFILE=1 python bench/opencl_gemm_shapes.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import opencl_kernel_seconds as kernel_seconds  # noqa: E402
from common import with_machine  # noqa: E402

os.environ.setdefault("NDLITE_OPENCL_PROFILE", "1")

C, T, HD = 384, 256, 64


def products(batch: int) -> list:
    """(name, a's stored shape, transpose a?, b's stored shape, transpose b?) per product
    a' @ b' of the last two dims, a' = a (or its transposed view), b' likewise."""
    bt, heads = batch * T, batch * 6
    return [(f"{name} {part}", *spec) for name, width, out in
            [("qkv", C, 3 * C), ("proj", C, C), ("fc", C, 4 * C), ("fc2", 4 * C, C)]
            for part, spec in [("forward", ((bt, width), False, (out, width), True)),
                               ("grad_x", ((bt, out), False, (out, width), False)),
                               ("grad_w", ((bt, out), True, (bt, width), False))]] + [
        ("scores", (heads, T, HD), False, (heads, T, HD), True),
        ("attend", (heads, T, T), False, (heads, T, HD), False),
        ("grad_probs", (heads, T, HD), False, (heads, T, HD), True),
        ("grad_values", (heads, T, T), True, (heads, T, HD), False),
        ("grad_q", (heads, T, T), False, (heads, T, HD), False),
        ("grad_k", (heads, T, T), True, (heads, T, HD), False),
    ]


def t_last(b, x):
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return b.permute(x, axes)


def cublas_seconds(a, ta, bm, tb, repeats: int) -> float | None:
    try:
        import cupy
    except ImportError:
        return None
    x, y = cupy.asarray(a), cupy.asarray(bm)
    x, y = (x.swapaxes(-1, -2) if ta else x), (y.swapaxes(-1, -2) if tb else y)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(3):
        cupy.matmul(x, y)
    times = []
    for _ in range(repeats):
        start.record()
        cupy.matmul(x, y)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="opencl:gpu")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--batch", type=int, default=64, help="sequences of 256 tokens (the GPT's 64)")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)

    import ndlite

    b = ndlite.get_backend(args.backend)
    from ndlite_opencl import tuning

    tuned = tuning.gemm_params(b)
    tuned_small = tuning.gemm_params(b, "small")
    candidates = [c for c in tuning._candidates(b) if tuning.fits(b, c)]
    rng = np.random.default_rng(0)
    rows = []
    for name, a_shape, ta, b_shape, tb in products(args.batch):
        a = rng.standard_normal(a_shape, dtype=np.float32)
        bm = rng.standard_normal(b_shape, dtype=np.float32)
        x, y = b.from_numpy(a), b.from_numpy(bm)
        x, y = (t_last(b, x) if ta else x), (t_last(b, y) if tb else y)
        m, k = x.shape[-2:]
        flops = 2 * m * k * y.shape[-1] * int(np.prod(x.shape[:-2]))
        row = {"product": name, "gflop": flops / 1e9, "sweep": {}}
        for params in [tuned] + candidates:
            b._gemm_params = params
            b._gemm_params_small = tuned_small if params is tuned else params
            b.__dict__.pop("_matmul_plans", None)
            key = "tuned" if params is tuned else "x".join(str(v) for v in params.values())
            row["sweep"][key] = kernel_seconds(b, lambda x=x, y=y: b.matmul(x, y),
                                                 args.repeats)
        b._gemm_params, b._gemm_params_small = tuned, tuned_small
        b.__dict__.pop("_matmul_plans", None)
        row["cublas_s"] = cublas_seconds(a, ta, bm, tb, args.repeats)
        rows.append(row)
    print(f"the GPT's products on {b.device_name()} ({b.name}), tuned tiles {tuned}, for "
          f"batches of small products {tuned_small}; ms:")
    print(f"  {'product':18s} {'tuned':>7s} {'TFLOP/s':>7s} {'cuBLAS':>7s} {'ratio':>6s}  best")
    total = best_total = cublas_total = 0.0
    for row in rows:
        tuned_s = row["sweep"]["tuned"]
        best = min(row["sweep"].items(), key=lambda kv: kv[1])
        ref = row["cublas_s"] or 0.0
        total, best_total, cublas_total = total + tuned_s, best_total + best[1], cublas_total + ref
        print(f"  {row['product']:18s} {tuned_s * 1e3:7.3f} {row['gflop'] / tuned_s / 1e3:7.2f} "
              f"{ref * 1e3:7.3f} {tuned_s / ref if ref else 0:6.2f}  {best[0]} {best[1] * 1e3:.3f}")
    print(f"  {'all':18s} {total * 1e3:7.3f} {'':7s} {cublas_total * 1e3:7.3f}  best of each "
          f"{best_total * 1e3:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(with_machine({"device": b.device_name(), "backend": b.name,
                                    "tuned": tuned, "tuned_small": tuned_small,
                                    "rows": rows}), f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
