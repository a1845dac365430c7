"""`ndlite bench crossover | overhead | train`: tables, JSON with the machine it ran on (CPU
model, cores, threads, versions), the PNG, and a clear word on what a run could not measure.
Tiny sizes and budgets: these check the plumbing, not the figures."""

import json

import pytest

from ndlite.cli import main


def _report(path):
    report = json.loads(path.read_text())
    machine = report["machine"]
    assert machine["cpu"] and machine["cpus"]["logical"] >= 1 and "numpy" in machine["versions"]
    assert "ndlite" in machine["versions"] and isinstance(machine["blas"], list)
    return report


def test_crossover_table_json_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (ndlite[plot])")
    out, png = tmp_path / "c.json", tmp_path / "c.png"
    assert main(["bench", "crossover", "--backends", "numpy", "nosuchbackend",
                 "--sizes", "5", "50", "--model", "8,16,4", "--batches", "1", "4",
                 "--budget", "0.01", "--no-progress", "--json", str(out),
                 "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "Linear n -> n at batch 4" in text and "MLP 8-16-4, training step" in text
    assert "not measured: backend nosuchbackend" in text
    report = _report(out)
    assert set(report["linear"]) == {"5", "50"} and set(report["model_steps"]) == {"1", "4"}
    assert report["linear"]["50"]["numpy"] > 0 and report["model_steps"]["4"]["numpy"] > 0
    assert report["complete"] is False and "backend nosuchbackend" in report["missing"]
    assert list(report["machine"]["devices"]) == ["numpy"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_crossover_compares_every_available_backend(tmp_path, capsys):
    import ndlite

    opencl, why = ndlite.device.registry.probe("opencl")
    if opencl is None:
        pytest.skip(f"opencl unavailable: {why}")
    out = tmp_path / "c.json"
    assert main(["bench", "crossover", "--backends", "numpy", "opencl", "--sizes", "5",
                 "--model", "4,4", "--batches", "2", "--budget", "0.01", "--no-plot",
                 "--no-progress", "--json", str(out)]) == 0
    report = _report(out)
    assert set(report["linear"]["5"]) == {"numpy", opencl.name}
    assert report["complete"] is True
    assert opencl.name in report["linear_crossover"]


def test_crossover_without_matplotlib_still_measures(tmp_path, monkeypatch, capsys):
    from ndlite.cli import metrics

    monkeypatch.setattr(metrics, "matplotlib_missing", lambda: "No module named 'matplotlib'")
    out = tmp_path / "c.json"
    assert main(["bench", "crossover", "--backends", "numpy", "--sizes", "5", "--model",
                 "4,4", "--batches", "2", "--budget", "0.01", "--no-progress",
                 "--json", str(out), "--plot", str(tmp_path / "c.png")]) == 0
    assert "not measured: plot: matplotlib is not installed" in capsys.readouterr().out
    assert not (tmp_path / "c.png").exists() and "plot" in _report(out)["missing"]


def test_crossover_refuses_a_bad_model(capsys):
    assert main(["bench", "crossover", "--model", "784"]) == 2
    assert "positive layer widths" in capsys.readouterr().err


def test_overhead_without_pytorch_says_so(tmp_path, monkeypatch, capsys):
    from ndlite.cli.bench import overhead

    monkeypatch.setattr(overhead, "import_torch", lambda threads: None)
    out = tmp_path / "o.json"
    assert main(["bench", "overhead", "--budget", "0.002", "--repeats", "1", "--threads", "1",
                 "--no-progress", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "not measured: torch, torch+grad columns: PyTorch is not installed" in text
    report = _report(out)
    assert set(report["per_op_8_float32"]["add"]) == {"numpy", "ndlite", "ndlite+grad"}
    assert set(report["linear_batch4_fwd_bwd"]) == {"5", "50", "500"}
    assert report["complete"] is False and report["threads"] == 1


def test_overhead_with_pytorch_has_its_columns(tmp_path, capsys):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    out = tmp_path / "o.json"
    assert main(["bench", "overhead", "--budget", "0.002", "--repeats", "1",
                 "--no-progress", "--json", str(out)]) == 0
    report = _report(out)
    assert "torch+grad" in report["per_op_8_float32"]["exp"] and report["complete"] is True
    assert "torch" in report["linear_batch4_fwd_bwd"]["5"]
    assert report["machine"]["versions"]["torch"] != "not installed"


def test_train_epoch_json(tmp_path, monkeypatch, capsys):
    from ndlite.cli.bench import train

    monkeypatch.setattr(train, "import_torch", lambda threads: None)
    out = tmp_path / "t.json"
    assert main(["bench", "train", "--limit", "200", "--repeats", "1", "--no-progress",
                 "--json", str(out)]) == 0
    report = _report(out)
    assert report["images"] == 200 and report["best_epoch_seconds"]["ndlite (numpy)"] > 0
    assert "PyTorch epochs" in report["missing"]
    assert "PyTorch is not installed" in capsys.readouterr().out


def test_bench_without_a_benchmark_prints_help(capsys):
    assert main(["bench"]) == 2
    assert "crossover" in capsys.readouterr().out
