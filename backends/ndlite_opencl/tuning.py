"""Tile sizes for the fast matmul (gemm.cl), chosen per device by a short tuning at first use.

Each candidate is built, checked against a float64 product on the host and timed with OpenCL
profiling events, on two problems that ask for different tiles: a square product (2048 on
GPUs, 512 on CPUs) for large products, and on GPUs a batch of small ones (256 products of
256 x 64 by 64 x 256, attention's per head) for batches of matrices of at most SMALL
elements, where big tiles leave few k-steps to hide their loads behind (on an H100 the
attention products of the GPT took 0.13-0.17 ms each with the square's 128 x 128 tiles,
0.08-0.10 with 64-row ones). The fastest correct one of each is kept in
`<cache>/opencl-gemm.json` (cache: NDLITE_CACHE_DIR, else ~/.cache/ndlite), keyed by platform,
device and driver (and the problem), so later runs start with it. NDLITE_OPENCL_TUNE=0 skips
the timing and takes the first candidate that fits the device. The tiles do not change a
product's bits (each element sums its k in order); a split along K does (linalg.py), and it
is planned on the square's tiles.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np
import pyopencl as cl

from ndlite.device import KernelBuildError

from . import devices, gemm

# (TSM, TSN, TSK, WPTM, WPTN): work-group tile of C, k-step, and each work-item's block of C
GPU_CANDIDATES = [
    (128, 128, 16, 8, 8), (128, 128, 8, 8, 8), (64, 128, 16, 8, 8), (128, 64, 16, 8, 8),
    (64, 64, 16, 4, 4), (64, 64, 16, 8, 8), (64, 64, 32, 8, 8), (128, 128, 16, 8, 16),
]
CPU_CANDIDATES = [
    (32, 32, 16, 4, 4), (64, 64, 16, 4, 4), (64, 64, 16, 8, 8), (32, 64, 32, 4, 8),
]
_NAMES = ("TSM", "TSN", "TSK", "WPTM", "WPTN")
#: a batched product whose output matrices hold at most this many elements tunes as "small"
SMALL = 256 * 256
#: problem -> (batch, M, N, K) of its timed product (size: the square's side, set per device)
PROBLEMS = {"square": None, "small": (256, 256, 256, 64)}


def cache_path() -> str:
    return os.path.join(devices.cache_dir(), "opencl-gemm.json")


def device_key(device) -> str:
    return " | ".join(s.strip() for s in (device.platform.name, device.name,
                                          device.driver_version, device.version))


def gemm_params(b, problem: str = "square") -> dict | None:
    """The tile sizes for backend `b`'s device and `problem` ("square": large products;
    "small": batches of small ones, GPUs only): from the disk cache, else tuned now."""
    if problem != "square" and not b.is_gpu:
        problem = "square"
    attribute = "_gemm_params" if problem == "square" else f"_gemm_params_{problem}"
    params = getattr(b, attribute, False)
    if params is not False:
        return params
    key = device_key(b.device) + ("" if problem == "square" else f" | {problem}")
    entry = _read_cache().get(key)
    if entry is not None:
        params = entry["params"]
    elif os.environ.get("NDLITE_OPENCL_TUNE", "1") == "0":
        params = next((p for p in _candidates(b) if fits(b, p)), None)
    else:
        report = tune(b, problem=problem)
        params = report["params"]
        if params is not None:
            _write_cache(key, report)
    setattr(b, attribute, params)
    return params


def _candidates(b) -> list[dict]:
    candidates = GPU_CANDIDATES if b.is_gpu else CPU_CANDIDATES
    return [dict(zip(_NAMES, c, strict=True)) for c in candidates]


def fits(b, p: dict) -> bool:
    """Whether tile sizes `p` are well formed and fit the device's work-group and local memory."""
    rtm, rtn = p["TSM"] // p["WPTM"], p["TSN"] // p["WPTN"]
    threads = rtm * rtn
    local = 2 * 4 * p["TSK"] * (p["TSM"] + p["TSN"] + 8)  # two buffers of each tile, padded
    return (p["WPTM"] % 4 == 0 and p["WPTN"] % 4 == 0 and p["TSK"] % 4 == 0
            and (p["TSM"] * p["TSK"] // 4) % threads == 0
            and (p["TSN"] * p["TSK"] // 4) % threads == 0
            and threads <= b.max_group and local <= b.device.local_mem_size)


def tune(b, candidates: list[dict] | None = None, size: int | None = None,
         repeats: int = 5, problem: str = "square") -> dict:
    """Time every candidate on `problem` (PROBLEMS; the square's side is `size`); returns the
    report that is cached: {"params": the fastest correct candidate, "size", "problem",
    "results": [per candidate]}."""
    candidates = candidates or _candidates(b)
    size = size or (2048 if b.is_gpu else 512)
    batch, m, n, k = PROBLEMS[problem] or (1, size, size, size)
    rng = np.random.default_rng(0)
    host_a = rng.standard_normal((batch, m, k), dtype=np.float32)
    host_b = rng.standard_normal((batch, k, n), dtype=np.float32)
    reference = host_a.astype(np.float64) @ host_b.astype(np.float64)
    x, y = b.from_numpy(host_a), b.from_numpy(host_b)
    out = b._new((batch, m, n), np.dtype("float32"), "tune")
    queue = cl.CommandQueue(b.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    plan = ((m, n, k, (batch,), (m * k,), (k * n,), (m * n,), k, 1, n, 1) if batch > 1 else
            (m, n, k, (), (), (), (), k, 1, n, 1))
    results, best, started = [], None, time.perf_counter()
    for params in candidates:
        entry = {"params": params}
        results.append(entry)
        if not fits(b, params):
            entry["skipped"] = "does not fit the device"
            continue
        try:
            gemm.run(b, out, x, y, plan, params, queue=queue).wait()
        except (KernelBuildError, cl.Error) as exc:
            entry["skipped"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            continue
        error = float(np.linalg.norm(b.to_numpy(out) - reference) / np.linalg.norm(reference))
        entry["relative_error"] = error
        if not error < 1e-5:
            entry["skipped"] = "wrong result"
            continue
        times = []
        for _ in range(repeats):
            event = gemm.run(b, out, x, y, plan, params, queue=queue)
            event.wait()
            times.append((event.profile.end - event.profile.start) * 1e-9)
        seconds = statistics.median(times)
        entry["ms"] = seconds * 1e3
        entry["gflops"] = 2 * batch * m * n * k / seconds * 1e-9
        if best is None or seconds < best[0]:
            best = (seconds, params)
    return {"params": best[1] if best else None, "size": size, "problem": problem,
            "results": results,
            "device": device_key(b.device), "tuning_seconds": time.perf_counter() - started}


def _read_cache() -> dict:
    try:
        with open(cache_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _write_cache(key: str, report: dict) -> None:
    """Add one device's result; a cache we cannot write only costs a re-tune next run."""
    try:
        os.makedirs(devices.cache_dir(), exist_ok=True)
        data = _read_cache()
        data[key] = report
        tmp = f"{cache_path()}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, cache_path())
    except OSError:
        pass
