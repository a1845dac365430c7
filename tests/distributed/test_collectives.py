"""The collectives on the MPI engine with 1, 2 and 3 ranks: every op on every dtype and every
backend this machine has, results checked on each rank and bitwise the same on all ranks."""

import re

import pytest

from .launching import explain, launch, needs_mpi


@needs_mpi
@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_every_collective_on_every_dtype_and_backend(nproc):
    result = launch("collectives.py", nproc=nproc)
    assert result.returncode == 0, explain(result)
    done = re.findall(r"CHECKED rank (\d+): (\d+) checks on (.*)", result.stdout)
    assert sorted(int(r) for r, _, _ in done) == list(range(nproc)), explain(result)
    assert len({n for _, n, _ in done}) == 1  # every rank checked as much
    assert all("numpy" in names for _, _, names in done)
