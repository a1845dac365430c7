"""`ndlite train mnist`: a short real run (report lines, checkpoint, JSON) and bad arguments
(non-zero exit, one-line reason)."""

import json

import pytest

import ndlite
from ndlite.cli import main


def test_short_run_reports_saves_and_writes_json(tmp_path, capsys):
    ckpt, report = tmp_path / "model.npz", tmp_path / "run.json"
    code = main(["train", "mnist", "--subset", "--limit", "256", "--epochs", "1",
                 "--batch-size", "64", "--optimizer", "adam", "--no-progress",
                 "--save", str(ckpt), "--json", str(report)])
    assert code == 0
    out = capsys.readouterr().out
    assert "epoch  1  train loss" in out and "test accuracy" in out and "images/s" in out
    state = ndlite.load(ckpt)
    model = ndlite.nn.models.mnist_cnn()
    model.load_state_dict(state["model"])
    epochs = json.loads(report.read_text())["epochs"]
    assert len(epochs) == 1 and epochs[0]["images"] == 256
    assert 0.0 <= epochs[0]["test_accuracy"] <= 1.0


@pytest.mark.parametrize("argv,reason", [
    (["--subset", "--epochs", "0"], "--epochs must be positive"),
    (["--subset", "--batch-size", "-1"], "--batch-size must be positive"),
    (["--subset", "--lr", "0"], "--lr must be positive"),
    (["--subset", "--data-dir", "x"], "either --subset or --data-dir"),
    (["--data-dir", "/nonexistent/mnist"], "not found"),
    (["--subset", "--backend", "nosuchbackend"], "nosuchbackend"),
])
def test_bad_arguments_exit_non_zero_with_one_line(argv, reason, capsys):
    assert main(["train", "mnist", *argv]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and reason in err and err.startswith("ndlite train")


def test_unknown_optimizer_is_an_argparse_error():
    with pytest.raises(SystemExit) as info:
        main(["train", "mnist", "--optimizer", "lbfgs"])
    assert info.value.code == 2


def test_a_quick_limited_run_learns(capsys):
    """Four steps of Adam on 512 digits beat chance; RMSprop's 10x first step did not (the
    old default ended at 10% accuracy with a loss of 3.79)."""
    assert main(["train", "mnist", "--subset", "--epochs", "1", "--limit", "512",
                 "--no-progress"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("epoch  1"))
    loss = float(line.split("train loss ")[1].split()[0])
    accuracy = float(line.split("test accuracy ")[1].split("%")[0])
    assert loss < 2.3026  # ln 10: better than a uniform guess
    assert accuracy > 25.0


def test_metrics_are_json_lines_per_interval_and_epoch(tmp_path):
    path = tmp_path / "run.jsonl"
    assert main(["train", "mnist", "--subset", "--limit", "640", "--epochs", "2",
                 "--batch-size", "64", "--log-every", "4", "--no-progress",
                 "--metrics", str(path)]) == 0
    records = [json.loads(line) for line in path.read_text().splitlines()]
    intervals = [r for r in records if r["event"] == "interval"]
    epochs = [r for r in records if r["event"] == "epoch"]
    # 10 steps an epoch, a line every 4 steps: steps 4 and 8, then 14 and 18
    assert [r["step"] for r in intervals] == [4, 8, 14, 18]
    assert [r["epoch"] for r in epochs] == [1, 2] and epochs[1]["images"] == 1280
    assert epochs[1]["epochs_done"] == 2.0 and epochs[0]["epoch_images"] == 640
    assert all(0.0 <= r["test_accuracy"] <= 1.0 for r in epochs)
    assert all(r["loss"] > 0 for r in records)
    assert [r["elapsed_s"] for r in records] == sorted(r["elapsed_s"] for r in records)


def test_plot_draws_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (ndlite[plot])")
    png = tmp_path / "curves.png"
    assert main(["train", "mnist", "--subset", "--limit", "256", "--epochs", "2",
                 "--batch-size", "64", "--no-progress", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert f"curves to {png}" in capsys.readouterr().out


def test_plot_without_matplotlib_fails_before_training(monkeypatch, capsys, tmp_path):
    from ndlite.cli import metrics

    monkeypatch.setattr(metrics, "matplotlib_missing", lambda: "No module named 'matplotlib'")
    assert main(["train", "mnist", "--subset", "--plot", str(tmp_path / "x.png")]) == 2
    captured = capsys.readouterr()
    assert "pip install 'ndlite[plot]'" in captured.err and "epoch" not in captured.out


def test_missing_data_points_a_cli_user_at_download(capsys):
    assert main(["train", "mnist", "--data-dir", "/nonexistent/mnist"]) == 2
    err = capsys.readouterr().err
    assert "--download" in err and "download=True" not in err


def test_every_option_of_train_has_help():
    import argparse

    from ndlite.cli import build_parser

    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions[0].choices.items()
                 if a[0] == "train")[1]
    tasks = next(a for a in train._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(tasks.choices) == ["gpt", "mnist"]
    for task in tasks.choices.values():
        undocumented = [a.option_strings for a in task._actions
                        if a.option_strings and not a.help]
        assert undocumented == []
