"""`ndlite conformance`: prove backends right against the reference, op by op.

Prints a table op × backend × dtype with the examples run, the worst error in units of the
tolerance (<= 1 passes) and the verdict; on a failure, the shrunk failing example and one
command that replays it. Exit status 0 only if every run passed (skips are listed, not failures).

    ndlite conformance                                   the default backend, ci profile
    ndlite conformance --all --profile thorough          every available backend, 250 examples
    ndlite conformance --backend opencl --ops 'conv*,max_pool2d' --json report.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("conformance", help="check backends against the reference, op by op",
                       description="Run the conformance kit: every op on each backend against "
                                   "the NumPy float64 reference, forward values, gradients and "
                                   "determinism, with hypothesis-drawn cases.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--backend", action="append", metavar="NAME",
                       help="a backend to check (repeatable; default: the current default "
                            "backend, NDLITE_BACKEND or numpy)")
    which.add_argument("--all", action="store_true",
                       help="every known backend; unavailable ones are listed with the reason")
    p.add_argument("--profile", choices=("ci", "dev", "thorough"), default="ci",
                   help="hypothesis profile: ci (25 examples, derandomized), thorough (250)")
    p.add_argument("--max-examples", type=int, metavar="N",
                   help="override the profile's examples per op")
    p.add_argument("--ops", metavar="GLOB", help="only ops matching these globs "
                                                  "(comma-separated: 'conv*,max_pool2d')")
    p.add_argument("--dtype", action="append", choices=("float32", "float64"),
                   help="only this dtype (repeatable; default: both)")
    p.add_argument("--order", choices=("1", "2", "both"), default="both",
                   help="1: values and gradients; 2: gradients of gradients (the ops whose "
                        "spec asks for it); default both")
    p.add_argument("--json", metavar="PATH", help="also write every result as JSON to PATH")
    p.add_argument("--reproduce", metavar="BLOB",
                   help="replay one failure (the blob a failure printed; needs one backend, "
                        "one op and one dtype)")
    p.add_argument("--programs", action="store_true",
                   help="fuzz whole programs (views, in-place ops, grad modes) against finite "
                        "differences, the reference and PyTorch if installed, not op by op")
    p.add_argument("--seed", type=int, help="with --programs: a random seed (default: the "
                                             "derandomized ci examples)")
    p.set_defaults(run=run)


def _settings(args):
    from hypothesis import settings

    from ndlite.testing import register_profiles

    register_profiles()
    chosen = settings.get_profile(args.profile)
    if args.max_examples:
        chosen = settings(chosen, max_examples=args.max_examples)
    return chosen


def _backends(args) -> tuple[list, dict]:
    """(backends to run, {name: why} for those that cannot)."""
    from ndlite.device import registry

    if args.all:
        names = registry.known_backends()
    elif args.backend:
        names = [n.strip() for value in args.backend for n in value.split(",") if n.strip()]
    else:
        names = [registry.current_backend().name]
    found, missing = [], {}
    for name in names:
        backend, why = registry.probe(name)
        if backend is None:
            missing[name] = why
        elif backend not in found:
            found.append(backend)
    return found, missing


class _Progress:
    """Where the run has got to, on stderr, without repeating the table that stdout gets: a
    tqdm bar over all examples on a terminal, else a line every PERIOD seconds (a log)."""

    PERIOD = 30.0

    def __init__(self, total_runs: int, total_examples: int):
        self.bar = None
        self.runs, self.total_runs, self.failed = 0, total_runs, 0
        self.started = self.last = time.perf_counter()
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_examples, unit="ex", file=sys.stderr, leave=False,
                            dynamic_ncols=True)

    def start(self, label: str) -> None:
        if self.bar is not None:
            self.bar.set_description(label)

    def example(self) -> None:
        if self.bar is not None:
            self.bar.update()

    def done(self, result, budget: int) -> None:
        self.runs += 1
        self.failed += result.status == "fail"
        if self.bar is not None:
            self.bar.update(max(budget - result.examples, 0))
            return
        now = time.perf_counter()
        if now - self.last >= self.PERIOD and self.runs < self.total_runs:
            self.last = now
            print(f"  ... {self.runs}/{self.total_runs} runs done, {self.failed} failed, "
                  f"{now - self.started:.0f} s", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def hypothesis_home() -> Path:
    """Where hypothesis keeps its files during `ndlite conformance`: $HYPOTHESIS_STORAGE_DIRECTORY,
    else ndlite's cache folder (never a .hypothesis/ folder in the user's current directory)."""
    env = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ndlite" / "hypothesis"


@contextmanager
def _hypothesis_home():
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(hypothesis_home())
    try:
        yield
    finally:
        set_hypothesis_home_dir(None)  # back to hypothesis' own choice (for in-process callers)


def _worst(result) -> str:
    if result.status == "skip":
        return "-"
    if result.worst == float("inf"):
        return "inf"
    return f"{result.worst:.3g}"


def print_table(results) -> None:
    widths = [max([len("op")] + [len(r.op) for r in results]),
              max([len("backend")] + [len(r.backend) for r in results]), 7, 8, 10]
    head = ("op", "backend", "dtype", "examples", "worst/tol")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=False)) + "  result")
    for r in results:
        cells = (r.op, r.backend, r.dtype, str(r.examples), _worst(r))
        verdict = {"pass": "pass", "fail": "FAIL", "skip": f"skip: {r.reason}"}[r.status]
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + "  " + verdict)


def print_failures(results) -> None:
    for r in results:
        if r.status != "fail":
            continue
        print(f"\nFAIL {r.op} on {r.backend} in {r.dtype}: {r.reason}")
        if r.example:
            print(f"  shrunk example: {r.example}")
        print(f"  reproduce: {r.reproduce}")


def _run_programs(args) -> int:
    """--programs: the program fuzzer (ndlite.testing.programs) on the chosen backends."""
    from ndlite.testing.programs import fuzz

    return fuzz(_backends(args)[0], args.max_examples or 200, args.seed)


def run(args) -> int:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        print("ndlite conformance: the conformance kit needs hypothesis, a dependency of ndlite "
              "that is missing here; install it with: pip install 'hypothesis>=6.90'",
              file=sys.stderr)
        return 2
    with _hypothesis_home():
        return _run(args)


def _run(args) -> int:
    from ndlite.testing.catalog import get_op, op_names
    from ndlite.testing.runner import Result

    if args.programs:
        return _run_programs(args)
    settings = _settings(args)
    backends, missing = _backends(args)
    ops = op_names(args.ops)
    dtypes = args.dtype or ["float32", "float64"]
    if not ops:
        print(f"ndlite conformance: no op matches {args.ops!r}", file=sys.stderr)
        return 2
    if not backends and not args.all:
        for name, why in missing.items():
            print(f"ndlite conformance: backend {name} cannot run: {why}", file=sys.stderr)
        return 2
    orders = [1, 2] if args.order == "both" else [int(args.order)]
    runs = [(op, order) for op in ops for order in orders
            if order == 1 or get_op(op).spec.second_order]
    if args.reproduce and (len(backends) != 1 or len(runs) != 1 or len(dtypes) != 1):
        print("ndlite conformance: --reproduce needs exactly one --backend, one op in --ops, "
              "one --dtype and one --order", file=sys.stderr)
        return 2

    print(f"ndlite conformance: {len(ops)} ops ({len(runs) - len(ops)} also of 2nd order) x "
          f"{len(backends)} backend(s) x {'/'.join(dtypes)}, profile {args.profile} "
          f"({settings.max_examples} examples each), reference numpy float64")
    for backend in backends:
        print(f"  {backend.name}: {backend.device_name()}")
    for name, why in missing.items():
        print(f"  {name}: skipped, {why}")

    started = time.perf_counter()
    results = _run_all(args, settings, backends, runs, dtypes)
    results += [Result("*", name, "*", status="skip", reason=why)
                for name, why in missing.items()]
    elapsed = time.perf_counter() - started

    print()
    print_table(results)
    print_failures(results)
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
    print(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped "
          f"in {elapsed:.0f} s")
    if args.json:
        report = {"profile": args.profile, "max_examples": settings.max_examples,
                  "reference": "numpy float64", "elapsed_s": elapsed,
                  "backends": {b.name: b.device_name() for b in backends},
                  "unavailable": missing, "summary": counts,
                  "results": [r.to_dict() for r in results]}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0 if counts["fail"] == 0 else 1


def _run_all(args, settings, backends, runs, dtypes) -> list:
    """Every (backend, op, order, dtype) run in turn, with the progress shown."""
    from ndlite.testing.runner import run as run_one

    results = []
    total = len(runs) * len(backends) * len(dtypes)
    progress = _Progress(total, total * settings.max_examples)
    try:
        for backend in backends:
            for op, order in runs:
                for dtype in dtypes:
                    progress.start(f"{op} {backend.name} {dtype}")
                    result = run_one(op, backend, dtype, settings, reproduce=args.reproduce,
                                     on_example=progress.example, order=order)
                    progress.done(result, settings.max_examples)
                    results.append(result)
    finally:
        progress.close()
    return results
