"""`ndlite train mnist --nproc 2` on CPUs: the seed CNN data-parallel reaches the accuracy of
one process on the bundled subset, and reports for both ranks together."""

import json
import subprocess
import sys

from ndlite.cli import main

from .launching import ROOT, environment, needs_mpi

ARGS = ["train", "mnist", "--subset", "--epochs", "2", "--no-progress", "--seed", "1"]


@needs_mpi
def test_two_ranks_reach_the_accuracy_of_one_process(tmp_path, capsys):
    report = tmp_path / "two.json"
    two = subprocess.run([sys.executable, "-m", "ndlite", *ARGS, "--nproc", "2", "--json",
                          str(report)], capture_output=True, text=True, timeout=300,
                         env=environment(), cwd=str(ROOT))
    assert two.returncode == 0, two.stderr
    assert "data-parallel on 2 ranks (mpi" in two.stdout and "(64 per rank)" in two.stdout
    epochs = json.loads(report.read_text())["epochs"]
    assert [e["images"] for e in epochs] == [6000, 6000]  # 2 x 3000: no padding needed
    one_report = tmp_path / "one.json"
    assert main([*ARGS, "--json", str(one_report)]) == 0
    capsys.readouterr()
    one = json.loads(one_report.read_text())["epochs"][-1]["test_accuracy"]
    accuracy = epochs[-1]["test_accuracy"]
    assert accuracy >= 0.9 and one >= 0.9
    assert abs(accuracy - one) <= 0.03, (accuracy, one)


def test_the_global_batch_must_divide_among_the_ranks(capsys):
    assert main([*ARGS, "--nproc", "2", "--batch-size", "127"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "must divide evenly among 2 ranks" in err
