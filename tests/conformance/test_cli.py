"""`ndlite conformance`: the table, the exit status, the JSON report, and a failure's shrunk
example with a reproduction command that replays it."""

import json
import shlex

import ndlite
from ndlite.cli import main

from .faulty_backends import ExpSlightlyOff


def test_a_passing_run_exits_0_and_writes_json(tmp_path, capsys):
    path = tmp_path / "report.json"
    code = main(["conformance", "--backend", "numpy", "--ops", "exp,matmul",
                 "--max-examples", "5", "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "matmul              numpy    float32  5" in out and "8 passed, 0 failed" in out
    report = json.loads(path.read_text())
    assert report["summary"] == {"pass": 8, "fail": 0, "skip": 0}
    assert {r["op"] for r in report["results"]} == {
        "exp", "matmul", "exp (2nd order)", "matmul (2nd order)"}
    assert all(r["examples"] == 5 and r["worst"] <= 1 for r in report["results"])


def test_a_failure_exits_1_with_the_shrunk_example_and_a_reproduction(capsys):
    ndlite.register_backend(ExpSlightlyOff.name, ExpSlightlyOff)
    code = main(["conformance", "--backend", ExpSlightlyOff.name, "--ops", "exp",
                 "--dtype", "float32", "--max-examples", "30"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL exp on exp_slightly_off in float32" in out
    assert "shrunk example: inputs=[array(" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("reproduce: "))
    command = shlex.split(line.split("reproduce: ", 1)[1])
    assert command[:2] == ["ndlite", "conformance"] and "--reproduce" in command
    assert command[-4:-2] == ["--order", "1"]
    assert main(command[1:]) == 1  # the blob replays the failure at once
    replay = capsys.readouterr().out
    assert "exp  exp_slightly_off  float32  1 " in replay and "--reproduce" in replay


def test_an_unknown_backend_is_an_error(capsys):
    assert main(["conformance", "--backend", "nosuchbackend", "--ops", "exp"]) == 2
    assert "nosuchbackend cannot run" in capsys.readouterr().err
