"""The collectives on the MPI engine with 1, 2 and 3 ranks: every op on every dtype and every
backend this machine has, results checked on each rank and bitwise the same on all ranks."""

import re
import subprocess
import sys
import time

import pytest

from .launching import RANKS, ROOT, environment, explain, launch, needs_mpi


@needs_mpi
@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_every_collective_on_every_dtype_and_backend(nproc):
    result = launch("collectives.py", nproc=nproc)
    assert result.returncode == 0, explain(result)
    done = re.findall(r"CHECKED rank (\d+): (\d+) checks on (.*)", result.stdout)
    assert sorted(int(r) for r, _, _ in done) == list(range(nproc)), explain(result)
    assert len({n for _, n, _ in done}) == 1  # every rank checked as much
    assert all("numpy" in names for _, _, names in done)


def _bare_mpiexec(*args, timeout=120) -> subprocess.CompletedProcess:
    from ndlite.distributed.run import mpiexec_command

    return subprocess.run([*mpiexec_command(2), sys.executable, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=environment(),
                          cwd=str(ROOT))


@needs_mpi
def test_a_bare_mpiexec_world_without_the_launcher():
    result = _bare_mpiexec(RANKS / "collectives.py")
    assert result.returncode == 0, explain(result)
    assert len(re.findall(r"CHECKED rank \d+", result.stdout)) == 2, explain(result)


@needs_mpi
def test_under_a_bare_mpiexec_an_uncaught_exception_aborts_the_job():
    start = time.monotonic()
    result = _bare_mpiexec(RANKS / "fail.py", "collective", timeout=60)
    assert result.returncode != 0, explain(result)
    assert "ValueError: boom in rank 1 after a barrier" in result.stderr, explain(result)
    assert time.monotonic() - start < 30  # rank 0 waited in a barrier: MPI_Abort ended it
