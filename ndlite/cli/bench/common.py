"""What the `ndlite bench` subcommands share: backends by name, thread limits, a progress bar,
the JSON result (with the machine it was measured on) and what a run is missing."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

from ...benchmark import describe_machine, machine_info

TORCH_HINT = ("pip install torch, or a CPU-only build: pip install torch --index-url "
              "https://download.pytorch.org/whl/cpu")
PLOT_HINT = "pip install 'ndlite[plot]'"


def add_common(p, name: str) -> None:
    p.add_argument("--json", default=f"ndlite-bench-{name}.json", metavar="PATH",
                   help=f"write the results, with the machine they were measured on, to PATH "
                        f"(default: ndlite-bench-{name}.json)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="limit BLAS (and PyTorch) to N threads (default: all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def resolve_backends(specs) -> tuple[list, dict]:
    """([Backend], {spec: why not}) for backend names; None means every known backend."""
    from ...device.registry import known_backends, probe

    found, missing = [], {}
    for spec in specs or known_backends():
        backend, why = probe(spec)
        if backend is None:
            missing[spec] = why
        elif backend.name not in [b.name for b in found]:
            found.append(backend)
    return found, missing


def import_torch(threads: int | None):
    """PyTorch, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    if threads:
        torch.set_num_threads(threads)
    return torch


@contextmanager
def thread_limit(threads: int | None):
    if not threads:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads):
        yield


def progress(total: int, args, desc: str):
    """A tqdm bar on stderr (off with --no-progress, and when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, leave=False,
                disable=True if args.no_progress else None, dynamic_ncols=True)


def header(title: str, backends=()) -> dict:
    """Print what is measured and where; returns the machine facts for the JSON."""
    machine = machine_info(backends)
    print(title)
    print(f"  on {describe_machine(machine)}")
    for b in backends:
        print(f"  {b.name}: {b.device_name()}")
    return machine


def say_missing(missing: dict) -> None:
    """Say, after the table, what this run could not measure and how to get it."""
    for what, why in missing.items():
        print(f"not measured: {what}: {why}")


def write_json(path: str, machine: dict, payload: dict, missing: dict) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine, "complete": not missing, "missing": missing, **payload}
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return out
