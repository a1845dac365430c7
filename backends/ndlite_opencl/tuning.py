"""Tile sizes for the fast matmul (gemm.cl), chosen per device by a short tuning at first use.

Each candidate is built, checked against a float64 product on the host and timed with OpenCL
profiling events on a square problem (2048 on GPUs, 512 on CPUs); the fastest correct one is
kept in `<cache>/opencl-gemm.json` (cache: NDLITE_CACHE_DIR, else ~/.cache/ndlite), keyed by
platform, device and driver, so later runs start with it. NDLITE_OPENCL_TUNE=0 skips the
timing and takes the first candidate that fits the device.
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


def cache_path() -> str:
    return os.path.join(devices.cache_dir(), "opencl-gemm.json")


def device_key(device) -> str:
    return " | ".join(s.strip() for s in (device.platform.name, device.name,
                                          device.driver_version, device.version))


def gemm_params(b) -> dict | None:
    """The tile sizes for backend `b`'s device: from the disk cache, else tuned now."""
    params = getattr(b, "_gemm_params", False)
    if params is not False:
        return params
    key = device_key(b.device)
    entry = _read_cache().get(key)
    if entry is not None:
        params = entry["params"]
    elif os.environ.get("NDLITE_OPENCL_TUNE", "1") == "0":
        params = next((p for p in _candidates(b) if fits(b, p)), None)
    else:
        report = tune(b)
        params = report["params"]
        if params is not None:
            _write_cache(key, report)
    b._gemm_params = params
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
         repeats: int = 5) -> dict:
    """Time every candidate on a size x size x size product; returns the report that is cached:
    {"params": the fastest correct candidate, "size", "results": [per candidate]}."""
    candidates = candidates or _candidates(b)
    size = size or (2048 if b.is_gpu else 512)
    rng = np.random.default_rng(0)
    host_a = rng.standard_normal((size, size), dtype=np.float32)
    host_b = rng.standard_normal((size, size), dtype=np.float32)
    reference = host_a.astype(np.float64) @ host_b.astype(np.float64)
    x, y = b.from_numpy(host_a), b.from_numpy(host_b)
    out = b._new((size, size), np.dtype("float32"), "tune")
    queue = cl.CommandQueue(b.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    plan = (size, size, size, (), (), (), (), size, 1, size, 1)
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
        entry["gflops"] = 2 * size**3 / seconds * 1e-9
        if best is None or seconds < best[0]:
            best = (seconds, params)
    return {"params": best[1] if best else None, "size": size, "results": results,
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
