"""bench/ scripts keep results in bench/results/ only from complete runs: a partial run (no
PyTorch, a backend missing) goes to <name>.partial.json and says what is missing; --out x.json
writes x.json (not x.json.json)."""

import importlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench_common(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    common = importlib.import_module("common")
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    yield common
    sys.modules.pop("common", None)


def test_out_may_end_in_json(bench_common, tmp_path):
    assert bench_common.result_path("x.json") == tmp_path / "x.json"
    assert bench_common.result_path("x") == tmp_path / "x.json"
    assert bench_common.result_path("x.json", complete=False) == tmp_path / "x.partial.json"
    assert bench_common.result_path(str(tmp_path / "sub" / "y.json")) == tmp_path / "sub/y.json"


def test_a_partial_run_leaves_the_committed_result(bench_common, tmp_path, capsys):
    committed = tmp_path / "overhead.json"
    committed.write_text('{"complete": true}')
    path = bench_common.save("overhead", {"table": 1}, missing={"torch": "not installed"})
    assert path == tmp_path / "overhead.partial.json"
    assert committed.read_text() == '{"complete": true}'
    report = json.loads(path.read_text())
    assert report["complete"] is False and report["machine"]["cpu"]
    assert "PARTIAL RUN" in capsys.readouterr().err


def test_a_complete_run_replaces_it(bench_common, tmp_path):
    (tmp_path / "overhead.json").write_text("{}")
    path = bench_common.save("overhead.json", {"table": 2})
    assert path == tmp_path / "overhead.json"
    report = json.loads(path.read_text())
    assert report["table"] == 2 and report["complete"] is True
    assert {"cpu", "cpus", "blas", "versions"} <= set(report["machine"])


def test_the_overhead_script_without_pytorch_writes_a_partial_result(bench_common, tmp_path,
                                                                      monkeypatch, capsys):
    from ndlite.cli.bench import overhead

    monkeypatch.setattr(overhead, "import_torch", lambda threads: None)
    (tmp_path / "overhead.json").write_text("committed")
    script = importlib.import_module("overhead")
    try:
        assert script.main(["--budget", "0.002", "--repeats", "1", "--no-progress"]) == 0
    finally:
        sys.modules.pop("overhead", None)
    assert (tmp_path / "overhead.json").read_text() == "committed"
    partial = json.loads((tmp_path / "overhead.partial.json").read_text())
    assert "torch, torch+grad columns" in partial["missing"]
    assert "PyTorch is not installed" in capsys.readouterr().err
