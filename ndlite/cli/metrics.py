"""Training curves for `ndlite train`: JSON lines as training goes (`--metrics FILE`) and a
PNG of the loss and accuracy curves after it (`--plot PNG`, with matplotlib).

Each line of the metrics file is one JSON object:

    {"event": "interval", "epoch": 1, "step": 10, "images": 1280, "epochs_done": 0.21,
     "loss": 1.84, "elapsed_s": 2.9}
    {"event": "epoch", "epoch": 1, "step": 47, "images": 6000, "epochs_done": 1.0,
     "epoch_images": 6000, "loss": 0.89, "seconds": 1.6, "test_accuracy": 0.888,
     "images_per_second": 3747, "elapsed_s": 1.9}

`step` and `images` count from the start of training; `loss` is the mean training loss over
the interval's steps (over the whole epoch in an epoch line); `epochs_done` is the fraction of
training seen, the x axis of the plot.
"""

from __future__ import annotations

import json
import time


class MetricsLog:
    """Collects the curves (always, for --plot) and writes them as JSON lines to `path`
    (when given), one line every `every` steps and one per epoch, flushed as they come."""

    def __init__(self, path: str | None, every: int, train_size: int):
        self.every, self.train_size = every, train_size
        self.records: list[dict] = []
        self.file = open(path, "w") if path else None  # noqa: SIM115 - closed by close()
        self.step_count = self.images = 0
        self.epoch = 0
        self.started = time.perf_counter()
        self._loss = self._n = 0.0
        self._steps = 0

    def epoch_started(self, epoch: int) -> None:
        self.epoch = epoch

    def step(self, loss: float, images: int) -> None:
        self.step_count += 1
        self.images += images
        self._loss += loss * images
        self._n += images
        self._steps += 1
        if self._steps == self.every:
            self._write({"event": "interval", "loss": self._loss / self._n})
            self._loss = self._n = 0.0
            self._steps = 0

    def epoch_done(self, stats: dict) -> None:
        self._loss = self._n = 0.0  # an interval does not span two epochs
        self._steps = 0
        fields = {k: v for k, v in stats.items() if k not in ("epoch", "images")}
        self._write({"event": "epoch", "epoch_images": stats.get("images"), **fields})

    def _write(self, fields: dict) -> None:
        record = {"event": fields.pop("event"), "epoch": self.epoch, "step": self.step_count,
                  "images": self.images,
                  "epochs_done": round(self.images / max(self.train_size, 1), 4),
                  **fields, "elapsed_s": round(time.perf_counter() - self.started, 3)}
        self.records.append(record)
        if self.file is not None:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def read_metrics(path: str) -> list[dict]:
    """The records of a metrics file, in order."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def matplotlib_missing() -> str:
    """Why matplotlib cannot draw here ("" when it can)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return ""


def plot_curves(records: list[dict], path: str, title: str = "") -> None:
    """Training loss (every interval and per epoch) and test accuracy per epoch, to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib import ticker

    steps = [r for r in records if r["event"] == "interval"]
    epochs = [r for r in records if r["event"] == "epoch"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    if steps:
        left.plot([r["epochs_done"] for r in steps], [r["loss"] for r in steps],
                  color="tab:blue", alpha=0.6, label="training loss (interval mean)")
    left.hlines([r["loss"] for r in epochs], [r["epochs_done"] - 1 for r in epochs],
                [r["epochs_done"] for r in epochs], color="tab:orange", linewidth=2,
                label="training loss (epoch mean)")
    left.set_xlabel("epochs")
    left.set_ylabel("NLL loss")
    left.set_yscale("log")
    left.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    left.yaxis.set_minor_formatter(ticker.FormatStrFormatter("%g"))
    left.grid(True, alpha=0.3)
    left.legend()
    right.plot([r["epoch"] for r in epochs], [100 * r["test_accuracy"] for r in epochs], "o-",
               color="tab:green")
    right.set_xlabel("epoch")
    right.set_ylabel("test accuracy (%)")
    right.set_xticks([r["epoch"] for r in epochs])
    right.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=100)
    plt.close(fig)
