"""SGEMM (float32 C = A @ B, square) through ndlite's OpenCL backend vs CuPy's cuBLAS (TF32
off) on the same GPU in the same run, or, on a CPU device (PoCL), vs NumPy's BLAS on the same
cores.

The OpenCL product is the public matmul, timed by the profiling events of its kernels (GPUs:
the tuned gemm.cl, whose tuning runs first and whose table is recorded; CPUs: packing both
operands, then gemm_cpu.cl); cuBLAS with CUDA events, NumPy with the host clock. All after
warm-up, medians of --repeats runs. Prints a short table; writes everything to --json.

    NDLITE_OPENCL_PROFILE=1 python bench/opencl_sgemm.py --backend opencl:cpu --size 1024

    NDLITE_OPENCL_PROFILE=1 python bench/opencl_sgemm.py --size 4096 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import with_machine  # noqa: E402

os.environ.setdefault("NDLITE_OPENCL_PROFILE", "1")  # events need a profiling queue
os.environ["CUPY_TF32"] = "0"  # cuBLAS in true float32, as ndlite never uses TF32


def opencl_sgemm(spec: str, a: np.ndarray, b: np.ndarray, repeats: int) -> dict:
    import pyopencl as cl

    import ndlite

    be = ndlite.get_backend(spec)  # makes backends/ importable from a source checkout
    from ndlite_opencl import tuning

    started = time.perf_counter()
    params = tuning.gemm_params(be) if be.is_gpu else None  # tunes unless cached on disk
    tune_seconds = time.perf_counter() - started
    x, y = be.from_numpy(a), be.from_numpy(b)
    events = []
    enqueue = be.enqueue

    def recording(kernel, *args, **kwargs):
        event = enqueue(kernel, *args, **kwargs)
        events.append(event)
        return event

    be.enqueue = recording  # the public matmul, timed by its kernels' events (CPUs: the
    times, walls = [], []  # packing of both operands and the product)
    for i in range(repeats + 3):
        events.clear()
        started = time.perf_counter()
        out = be.matmul(x, y)
        be.synchronize()
        if i >= 3:
            walls.append(time.perf_counter() - started)
            times.append(sum(e.profile.end - e.profile.start for e in events) * 1e-9)
    be.enqueue = enqueue
    cached = tuning._read_cache().get(tuning.device_key(be.device), {})
    return {
        "backend": be.name, "device": be.device_name(), "gpu": be.is_gpu, "info": be.info(),
        "compute_units": be.compute_units, "pyopencl": cl.VERSION_TEXT, "params": params,
        "launches": len(events), "tuning_seconds_this_run": tune_seconds, "tuning": cached,
        "median_s": statistics.median(times), "times_s": times,
        "median_wall_s": statistics.median(walls), "result": be.to_numpy(out),
    }


def numpy_sgemm(a: np.ndarray, b: np.ndarray, repeats: int) -> dict:
    """NumPy's BLAS on this host, all its threads (the same cores PoCL runs on)."""
    a @ b
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        out = a @ b
        times.append(time.perf_counter() - started)
    return {"numpy": np.__version__, "threads": os.cpu_count(),
            "median_s": statistics.median(times), "times_s": times, "result": out}


def cupy_sgemm(a: np.ndarray, b: np.ndarray, repeats: int) -> dict | None:
    try:
        import cupy as cp
    except ImportError:
        return None
    x, y = cp.asarray(a), cp.asarray(b)
    out = x @ y
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for i in range(repeats + 3):
        start.record()
        cp.matmul(x, y, out=out)
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    props = cp.cuda.runtime.getDeviceProperties(0)
    return {"cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cp.cuda.runtime.driverGetVersion(),
            "device": props["name"].decode(), "median_s": statistics.median(times),
            "times_s": times, "result": cp.asnumpy(out)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--backend", default="opencl:gpu")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    n = args.size
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    flops = 2 * n**3
    ocl = opencl_sgemm(args.backend, a, b, args.repeats)
    cub = cupy_sgemm(a, b, args.repeats) if ocl["gpu"] else None
    cpu = None if cub else numpy_sgemm(a, b, args.repeats)
    check = a[:256].astype(np.float64) @ b.astype(np.float64)
    report = {"what": f"SGEMM {n}^3 float32", "host": platform.node(),
              "python": platform.python_version(), "numpy": np.__version__}
    for name, r in (("opencl", ocl), ("cublas", cub), ("numpy", cpu)):
        if r is None:
            continue
        got = r.pop("result")[:256]
        r["relative_error_rows_0_256"] = float(np.linalg.norm(got - check) / np.linalg.norm(check))
        r["tflops"] = flops / r["median_s"] * 1e-12
        report[name] = r
    if cub:
        report["ratio_opencl_to_cublas"] = report["opencl"]["tflops"] / report["cublas"]["tflops"]
    if cpu:
        report["ratio_opencl_to_numpy"] = report["opencl"]["tflops"] / report["numpy"]["tflops"]
    print(f"SGEMM {n}^3 float32 on {ocl['device']} ({args.backend}, tiles {ocl['params']}):")
    print(f"  ndlite OpenCL  {ocl['median_s'] * 1e3:8.3f} ms  {ocl['tflops']:6.3f} TFLOP/s  "
          f"rel.err {ocl['relative_error_rows_0_256']:.1e}")
    if cub:
        print(f"  CuPy cuBLAS    {cub['median_s'] * 1e3:8.3f} ms  {cub['tflops']:6.3f} TFLOP/s  "
              f"rel.err {cub['relative_error_rows_0_256']:.1e}  (TF32 off)")
        print(f"  ratio OpenCL / cuBLAS: {report['ratio_opencl_to_cublas']:.2f}x")
    if cpu:
        print(f"  NumPy (BLAS)   {cpu['median_s'] * 1e3:8.3f} ms  {cpu['tflops']:6.3f} TFLOP/s  "
              f"rel.err {cpu['relative_error_rows_0_256']:.1e}  ({cpu['threads']} threads)")
        print(f"  ratio OpenCL / NumPy: {report['ratio_opencl_to_numpy']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(with_machine(report), f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
