"""The pieces of a training run that `ndlite train` and its data-parallel ranks
(train_parallel.py) share: default learning rates, the optimizer by name, one epoch, and the
test accuracy."""

from __future__ import annotations

import sys
import time

from .. import optim
from ..graph import no_grad
from ..nn import functional as F
from ..serialization import save

DEFAULT_LR = {"rmsprop": 1e-3, "adam": 1e-3, "sgd": 0.05}
AMP_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
DEFAULT_OPTIMIZER = "adam"


def add_amp_option(parser) -> None:
    parser.add_argument("--amp", choices=sorted(AMP_DTYPES), default=None,
                        help="mixed precision: matmuls and convolutions in bfloat16 or float16 "
                             "under ndlite.autocast, parameters float32; fp16 scales the loss "
                             "with a GradScaler (default: float32 throughout)")


class Mixed:
    """What --amp asks for: the autocast region every forward runs in, and the backward and
    optimizer step (through a GradScaler for fp16). Without --amp, plain float32."""

    def __init__(self, amp: str | None, backend):
        from ..amp import GradScaler
        from ..device.registry import Device
        from ..dtypes import as_dtype

        self.name = amp
        self.dtype = as_dtype(AMP_DTYPES[amp]) if amp else None
        self.device = Device.of(backend).type
        self.scaler = GradScaler(self.device, enabled=amp == "fp16")

    @staticmethod
    def problem(amp: str | None, backend) -> str:
        """Why --amp cannot run on `backend` ("" when it can)."""
        from ..dtypes import as_dtype
        from ..errors import DTypeError

        if amp is None:
            return ""
        try:
            dtype = as_dtype(AMP_DTYPES[amp])
        except DTypeError as exc:
            return f"--amp {amp}: {exc}"
        if dtype not in backend.dtypes:
            return f"--amp {amp}: backend {backend.name} has no {dtype}"
        return ""

    def region(self):
        from ..amp import autocast

        return autocast(self.device, dtype=self.dtype, enabled=self.dtype is not None)

    def backward_step(self, loss, optimizer) -> None:
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()

    def describe(self) -> str:
        if self.name is None:
            return "float32"
        return f"amp {self.name}" + (" with a GradScaler" if self.scaler.is_enabled() else "")


def mixed_step(model, optimizer, mixed: Mixed):
    """One training step (NLL loss) with the forward under autocast: `train_epoch`'s step."""

    def step(x, y):
        optimizer.zero_grad()
        with mixed.region():
            loss = F.nll_loss(model(x), y)
        mixed.backward_step(loss, optimizer)
        return loss

    return step


def make_optimizer(name: str, params, lr: float, weight_decay: float):
    if name == "sgd":
        return optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    if name == "adam":
        return optim.Adam(params, lr=lr, weight_decay=weight_decay)
    return optim.RMSprop(params, lr=lr, weight_decay=weight_decay)


def train_epoch(model, loader, optimizer, progress=None, on_step=None, step=None) -> dict:
    """One pass over `loader`; returns mean loss, images and seconds.

    `step(x, y)` runs one training step and returns the loss (default: forward, NLL loss,
    backward, optimizer step); `on_step(loss, images)` is called after each step.
    """
    if step is None:
        def step(x, y):
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

    model.train()
    total, images, start = 0.0, 0, time.perf_counter()
    batches = progress if progress is not None else loader
    for x, y in batches:
        value = step(x, y).item()
        total += value * len(y)
        images += len(y)
        if progress is not None:
            progress.set_postfix(loss=f"{value:.4f}", refresh=False)
        if on_step is not None:
            on_step(value, len(y))
    seconds = time.perf_counter() - start
    return {"loss": total / max(images, 1), "images": images, "seconds": seconds}


def evaluate(model, loader) -> float:
    """Accuracy of `model` (log-probabilities out) over `loader`."""
    model.eval()
    correct = count = 0
    with no_grad():
        for x, y in loader:
            predicted = model(x).argmax(dim=1)
            correct += int((predicted == y).sum().item())
            count += len(y)
    return correct / max(count, 1)


def save_checkpoint(model, optimizer, epochs: int, path: str) -> None:
    """The model's and the optimizer's state, with the epoch count, to `path` (ndlite.save)."""
    save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epochs": epochs},
         path)
    print(f"saved the model and optimizer state to {path}")


def fail(message: str) -> int:
    """`ndlite train`'s error: the message on stderr, exit status 2."""
    print(f"ndlite train: error: {message}", file=sys.stderr)
    return 2
