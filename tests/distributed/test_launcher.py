"""The launcher (python -m ndlite.distributed.run, ndlite run): the environment each rank
sees, the exit status, and a failing rank stopping the others, under mpiexec and as plain
subprocesses."""

import json
import time

import pytest

from ndlite.cli import main

from .launching import explain, launch, needs_mpi

ENGINES = [pytest.param("mpi", marks=needs_mpi), "nccl"]  # under mpiexec / plain subprocesses


def _envs(stdout: str) -> list[dict]:
    rows = [json.loads(line[4:]) for line in stdout.splitlines() if line.startswith("ENV ")]
    return sorted(rows, key=lambda row: int(row["RANK"]))


@pytest.mark.parametrize("engine", ENGINES)
def test_each_rank_gets_torchrun_variables_and_the_environment(engine):
    result = launch("rank_env.py", nproc=3, engine=engine, env={"NDLITE_TEST_MARK": "kept"})
    assert result.returncode == 0, explain(result)
    envs = _envs(result.stdout)
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "2"]
    for e in envs:
        assert e["WORLD_SIZE"] == "3" and e["LOCAL_WORLD_SIZE"] == "3"
        assert e["MASTER_ADDR"] == "127.0.0.1" and int(e["MASTER_PORT"]) > 0
        assert e["NDLITE_TEST_MARK"] == "kept"
        assert int(e["OMP_NUM_THREADS"]) >= 1  # set for the ranks, who share the cores
    assert len({e["MASTER_PORT"] for e in envs}) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_a_module_runs_with_dash_m(engine):
    result = launch("rank_env", nproc=2, engine=engine, launcher=("-m",))
    assert result.returncode == 0, explain(result)
    assert [e["RANK"] for e in _envs(result.stdout)] == ["0", "1"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("how,status,reason", [
    ("raise", 1, "rank 1 failed: exit code 1: ValueError: boom in rank 1"),
    ("exit3", 3, "rank 1 failed: exit code 3: sys.exit(3)"),
])
def test_a_failing_rank_stops_every_rank_and_is_named(engine, how, status, reason):
    start = time.monotonic()
    result = launch("fail.py", how, engine=engine, timeout=60)
    elapsed = time.monotonic() - start
    assert result.returncode == status, explain(result)
    assert reason in result.stderr, explain(result)
    assert "stopped rank 0" in result.stderr, explain(result)
    assert elapsed < 30, f"rank 0 sleeps 120 s; the launcher took {elapsed:.0f} s to stop it"


def test_a_rank_killed_by_a_signal_is_named():
    result = launch("fail.py", "kill", engine="nccl", timeout=60)
    assert result.returncode == 128 + 9, explain(result)
    assert "rank 1 failed: killed by SIGKILL" in result.stderr, explain(result)
    assert "stopped rank 0" in result.stderr


@needs_mpi
def test_a_rank_killed_under_mpiexec_stops_the_job():
    start = time.monotonic()
    result = launch("fail.py", "kill", engine="mpi", timeout=60)
    assert result.returncode != 0, explain(result)
    assert "died without a report" in result.stderr, explain(result)
    assert time.monotonic() - start < 30


@needs_mpi
def test_a_rank_that_fails_while_another_waits_in_a_collective_stops_it():
    start = time.monotonic()
    result = launch("fail.py", "collective", engine="mpi", timeout=60)
    assert result.returncode == 1, explain(result)
    assert "rank 1 failed: exit code 1: ValueError: boom in rank 1 after a barrier" \
        in result.stderr, explain(result)
    assert time.monotonic() - start < 30


def test_mpi_ranks_started_without_mpiexec_get_a_clear_error():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'ndlite[mpi]'")
    result = launch("fail.py", "collective", engine="nccl", timeout=60)  # plain subprocesses
    assert result.returncode == 1, explain(result)
    assert "processes started separately cannot form an MPI world" in result.stderr


def test_bad_arguments_are_one_line_errors(capsys):
    assert main(["run", "--nproc-per-node", "0", "x.py"]) == 2
    assert "--nproc-per-node must be at least 1" in capsys.readouterr().err
    assert main(["run", "--nnodes", "2", "--engine", "nccl", "x.py"]) == 2
    assert "--master-port is needed" in capsys.readouterr().err


def test_ndlite_run_is_a_subcommand(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--help"])
    assert info.value.code == 0
    assert "--nproc-per-node" in capsys.readouterr().out
