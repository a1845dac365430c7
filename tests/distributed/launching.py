"""Helpers of the distributed tests: start scripts from ranks/ as several ranks through the
launcher (subprocesses with a timeout: nothing here may hang), and skip, saying why, where
mpi4py or the GPU is missing."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RANKS = Path(__file__).resolve().parent / "ranks"


def _mpi_reason() -> str | None:
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed: pip install 'ndlite[mpi]' (make test does)"
    from ndlite.distributed.mpi import mpiexec

    if mpiexec() is None:
        return "no mpiexec beside the interpreter or on PATH: pip install mpich"
    return None


MPI_MISSING = _mpi_reason()
needs_mpi = pytest.mark.skipif(MPI_MISSING is not None, reason=str(MPI_MISSING))


def environment(**extra) -> dict:
    """This environment, with the source checkout importable and a short collective timeout."""
    paths = [str(ROOT), str(ROOT / "backends"), str(RANKS)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), NDLITE_DIST_TIMEOUT="60")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def launch(script: str, *args, nproc: int = 2, engine: str = "mpi", timeout: float = 240,
           launcher: tuple = (), env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ranks/<script> (or, with launcher=("-m",), a module) as `nproc` ranks."""
    target = [script] if launcher else [str(RANKS / script)]
    command = [sys.executable, "-m", "ndlite.distributed.run", "--nproc-per-node", str(nproc),
               "--engine", engine, "--grace", "3", *launcher, *target, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env=environment(**(env or {})), cwd=str(ROOT))


def explain(result: subprocess.CompletedProcess) -> str:
    return f"exit code {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n" \
           f"{result.stderr}"
