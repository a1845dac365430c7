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
