"""`ndlite info`: every known backend, available or why not, its devices and versions."""

from __future__ import annotations

import json
import platform
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="list backends: available or why not, devices, versions",
                       description="List every known backend: whether it can run here (and if "
                                   "not, why and how to fix it), its devices, memory, fp64 "
                                   "support and library versions.")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(run=run)


def collect() -> dict:
    import numpy as np

    import ndlite
    from ndlite.device import registry

    report = {
        "ndlite": ndlite.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "default": None,
        "backends": {},
    }
    for name in registry.known_backends():
        backend, why = registry.probe(name)
        if backend is None:
            report["backends"][name] = {"available": False, "reason": why}
        else:
            report["backends"][name] = {"available": True, "name": backend.name,
                                        **backend.info()}
    try:
        report["default"] = registry.current_backend().name
    except Exception as exc:  # noqa: BLE001 - a bad NDLITE_BACKEND is reported, not raised
        report["default"] = f"error: {exc}"
    return report


def run(args) -> int:
    report = collect()
    if args.json:
        json.dump(report, sys.stdout, indent=2, default=str)
        print()
        return 0
    print(f"ndlite {report['ndlite']} (Python {report['python']}, NumPy {report['numpy']})")
    print(f"default backend: {report['default']}  (set NDLITE_BACKEND to change)")
    print()
    for name, entry in report["backends"].items():
        if not entry["available"]:
            print(f"{name:8s} unavailable: {entry['reason']}")
            continue
        print(f"{name:8s} available as {entry['name']!r}")
        for key, value in entry.items():
            if key in ("available", "name"):
                continue
            if isinstance(value, list):
                for i, item in enumerate(value):
                    print(f"{'':8s}   {key}[{i}]: {item}")
            else:
                print(f"{'':8s}   {key}: {value}")
    return 0
