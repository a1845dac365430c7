"""`ndlite train gpt` and the text data it reads: a tiny GPT learns the bundled text, reports
losses, samples, and saves a checkpoint a fresh model loads."""

import json

import numpy as np
import pytest

import ndlite
from ndlite.cli import main
from ndlite.data import CharText

TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16",
        "--batch-size", "8", "--eval-iters", "4", "--no-progress"]


def test_char_text_encodes_splits_and_windows():
    data = CharText("abcabcabcabc", train_fraction=0.75)
    assert data.chars == ["a", "b", "c"] and data.vocab_size == 3
    assert data.decode(data.encode("cab")) == "cab"
    assert len(data.train) == 9 and len(data.val) == 3
    x, y = data.batch("train", 4, 3, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 3)
    # targets are the inputs shifted by one character of the text
    assert np.array_equal(x.numpy()[:, 1:], y.numpy()[:, :-1])
    assert all(((row[1:] - row[:-1]) % 3 == 1).all() for row in x.numpy())
    with pytest.raises(ValueError, match="not in the vocabulary"):
        data.encode("abz")
    with pytest.raises(ValueError, match="too few"):
        data.batch("val", 1, 3, np.random.default_rng(0))


def test_bundled_text_is_real_shakespeare():
    data = CharText.bundled()
    text = data.decode(data.data[:200])
    assert text.startswith("First Citizen:") and len(data.data) > 150_000


def test_a_tiny_gpt_learns_the_bundled_text(tmp_path, capsys):
    out, ckpt = tmp_path / "run.json", tmp_path / "gpt.npz"
    assert main(["train", "gpt", "--preset", "small", *TINY, "--steps", "60",
                 "--eval-interval", "30", "--lr", "3e-3", "--sample-tokens", "40",
                 "--json", str(out), "--save", str(ckpt),
                 "--metrics", str(tmp_path / "m.jsonl")]) == 0
    run = json.loads(out.read_text())
    reports = run["reports"]
    assert [r["step"] for r in reports] == [0, 30, 59]
    # from chance (log 62 = 4.13) to well below it in 60 steps
    assert reports[0]["val"] > 4.0 and reports[-1]["train"] < 3.3
    assert len(run["sample"]) == 40
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 30, 59]
    state = ndlite.load(str(ckpt))
    assert state["vocabulary"] == "".join(CharText.bundled().chars)
    model = ndlite.nn.GPT(len(state["vocabulary"]), 16, 1, 2, 32)
    model.load_state_dict(state["model"])
    assert "val loss" in capsys.readouterr().out


def test_stop_at_ends_at_the_first_report_below_the_target(tmp_path):
    out = tmp_path / "run.json"
    assert main(["train", "gpt", "--preset", "small", *TINY, "--steps", "50",
                 "--eval-interval", "10", "--stop-at", "10.0", "--sample-tokens", "0",
                 "--json", str(out)]) == 0
    assert [r["step"] for r in json.loads(out.read_text())["reports"]] == [0]


@pytest.mark.parametrize("argv, message", [
    (["--n-head", "3", "--n-embd", "32"], "multiple of --n-head"),
    (["--steps", "0"], "--steps must be positive"),
    (["--dropout", "1.5"], "--dropout must be in"),
    (["--data", "/nonexistent/text.txt"], "No such file"),
])
def test_bad_arguments_fail_with_a_message(argv, message, capsys):
    assert main(["train", "gpt", "--preset", "small", *argv]) == 2
    assert message in capsys.readouterr().err
