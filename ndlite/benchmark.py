"""Timing and the facts of the machine, shared by `ndlite.select_backend`, `ndlite bench` and
the scripts in bench/: one way to time a step, and every result says where it was measured
(CPU model, cores and threads, library versions, devices).

>>> import ndlite
>>> seconds = seconds_per_call(lambda: ndlite.ones(8) + 1, budget=0.01)
>>> 0 < seconds < 0.01
True
>>> {"cpu", "cpus", "blas", "versions"} <= set(machine_info())
True
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

#: libraries whose versions every result records (those not installed say so)
LIBRARIES = ("ndlite", "numpy", "torch", "cupy", "pyopencl", "threadpoolctl", "matplotlib")
_DISTRIBUTIONS = {"cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy")}


def seconds_per_call(fn, sync=None, budget: float = 0.5, repeats: int = 5,
                     warmup: int = 3) -> float:
    """Median seconds per call of `fn()` over `repeats` runs that together take about
    `budget` seconds, after `warmup` calls. `sync()` (a backend's synchronize) ends each run,
    so queued GPU work is counted: the time a user waits for."""
    sync = sync or (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    start, count = time.perf_counter(), 0
    while count < 2 or time.perf_counter() - start < budget / (2 * repeats):
        fn()
        count += 1
    sync()
    per_call = (time.perf_counter() - start) / count
    number = max(1, int(budget / repeats / max(per_call, 1e-9)))
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC 9654 96-Core Processor")."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_id() -> str:
    """The CPU's family, model and stepping ("family 26 model 2 stepping 1"): the model name
    alone can be vague ("AMD EPYC" under a hypervisor)."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("cpu family", "model", "stepping") and key not in fields:
                fields[key] = value.strip()
            elif not key and fields:
                break
    except OSError:
        return ""
    return " ".join(f"{k.removeprefix('cpu ')} {v}" for k, v in fields.items())


def cpu_counts() -> dict:
    """Logical CPUs, physical cores (where Linux says) and the CPUs this process may use."""
    counts = {"logical": os.cpu_count()}
    try:
        cores, physical = set(), None
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "physical id":
                physical = value.strip()
            elif key == "core id":
                cores.add((physical, value.strip()))
        if cores:
            counts["physical_cores"] = len(cores)
    except OSError:
        pass
    if hasattr(os, "sched_getaffinity"):
        counts["usable"] = len(os.sched_getaffinity(0))
    return counts


def versions() -> dict:
    """Installed versions of LIBRARIES (read from package metadata: nothing is imported)."""
    out = {}
    for name in LIBRARIES:
        out[name] = "not installed"
        for dist in _DISTRIBUTIONS.get(name, (name,)):
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    if out["ndlite"] == "not installed":  # a source checkout on PYTHONPATH
        import ndlite

        out["ndlite"] = f"{ndlite.__version__} (source)"
    return out


def blas_threads() -> list[dict]:
    """The BLAS/OpenMP libraries loaded in this process and their thread counts."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [{k: info.get(k) for k in ("internal_api", "version", "num_threads")}
            for info in threadpool_info()]


def machine_info(backends=()) -> dict:
    """What a result must say about where it was measured: date, command, CPU model, core and
    thread counts, library versions, and the device of each backend in `backends`."""
    info = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([_program(), *sys.argv[1:]]),
        "cpu": cpu_model(),
        "cpu_id": cpu_id(),
        "cpus": cpu_counts(),
        "blas": blas_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions(),
    }
    if "torch" in sys.modules:
        info["torch_threads"] = sys.modules["torch"].get_num_threads()
    if backends:
        info["devices"] = {b.name: b.device_name() for b in backends}
    return info


def _program() -> str:
    path = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    if path.name == "__main__.py":  # python -m ndlite
        return f"python -m {path.parent.name}"
    return path.name


def describe_machine(info: dict) -> str:
    """One line for a benchmark's header: CPU, cores, threads."""
    cpus = info["cpus"]
    cores = f"{cpus.get('physical_cores', '?')} cores, {cpus['logical']} threads"
    blas = ", ".join(f"{b['internal_api']} {b['num_threads']} threads" for b in info["blas"])
    ident = f", {info['cpu_id']}" if info.get("cpu_id") else ""
    return f"{info['cpu']} ({cores}{ident}{'; ' + blas if blas else ''})"
