"""`ndlite train mnist|gpt --amp fp16|bf16`: tiny runs end to end, the training step under
autocast against the float32 step, and the one-line errors."""

import json
import math

import numpy as np
import pytest

import ndlite

pytest.importorskip("tqdm")  # the CLI's progress bar (a dependency; absent in the torch venv)

from ndlite.cli import main, train  # noqa: E402
from ndlite.cli.steps import Mixed, mixed_step  # noqa: E402
from ndlite.dtypes import ml_dtypes  # noqa: E402


def test_mnist_tiny_run_with_fp16(tmp_path, monkeypatch, capsys):
    datasets = train._datasets

    def small(args):  # 32 test digits: NumPy's float16 convolutions are slow
        train_set, test_set = datasets(args)
        test_set.images, test_set.labels = test_set.images[:32], test_set.labels[:32]
        return train_set, test_set

    monkeypatch.setattr(train, "_datasets", small)
    out = tmp_path / "run.json"
    assert main(["train", "mnist", "--subset", "--limit", "32", "--batch-size", "16",
                 "--epochs", "1", "--amp", "fp16", "--no-progress", "--json", str(out)]) == 0
    assert "amp fp16 with a GradScaler" in capsys.readouterr().out
    epoch = json.loads(out.read_text())["epochs"][0]
    assert math.isfinite(epoch["loss"]) and 0 <= epoch["test_accuracy"] <= 1


def test_gpt_tiny_run_with_fp16(tmp_path, capsys):
    out = tmp_path / "gpt.json"
    assert main(["train", "gpt", "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
                 "--block-size", "8", "--batch-size", "2", "--steps", "4", "--eval-interval",
                 "2", "--eval-iters", "1", "--sample-tokens", "5", "--amp", "fp16",
                 "--no-progress", "--json", str(out)]) == 0
    reports = json.loads(out.read_text())["reports"]
    assert reports and all(math.isfinite(r["val"]) for r in reports)
    assert "amp fp16" in capsys.readouterr().out


def test_the_amp_step_follows_the_float32_step():
    """One Adam step of a small net: under fp16 autocast with a GradScaler the loss and the
    updated float32 parameters agree with float32 training to half precision."""
    rng = np.random.default_rng(0)
    x = ndlite.tensor(rng.standard_normal((8, 12)).astype(np.float32))
    y = ndlite.tensor(rng.integers(0, 4, 8))
    losses, weights = [], []
    for amp in (None, "fp16"):
        ndlite.manual_seed(0)
        model = ndlite.nn.Sequential(ndlite.nn.Linear(12, 16), ndlite.nn.ReLU(),
                                     ndlite.nn.Linear(16, 4), ndlite.nn.LogSoftmax(dim=1))
        opt = ndlite.optim.Adam(model.parameters(), lr=1e-2)
        mixed = Mixed(amp, x._backend)
        losses.append(mixed_step(model, opt, mixed)(x, y).item())
        weights.append(model[0].weight.detach().numpy().copy())
        assert model[0].weight.dtype == ndlite.float32
    assert abs(losses[0] - losses[1]) < 5e-3
    np.testing.assert_allclose(weights[1], weights[0], atol=2e-3)


def test_amp_errors_are_one_line(capsys):
    assert main(["train", "mnist", "--subset", "--amp", "fp16", "--graph"]) == 2
    assert "--amp does not combine" in capsys.readouterr().err
    if ml_dtypes is None:
        assert main(["train", "gpt", "--steps", "1", "--amp", "bf16"]) == 2
        assert "ml_dtypes" in capsys.readouterr().err


@pytest.mark.skipif(ml_dtypes is None, reason="bfloat16 needs ml_dtypes")
def test_bf16_needs_no_scaler():
    mixed = Mixed("bf16", ndlite.get_backend())
    assert mixed.dtype == ndlite.bfloat16 and not mixed.scaler.is_enabled()
