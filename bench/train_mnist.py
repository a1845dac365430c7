"""Epoch time of the seed CNN on MNIST: ndlite's NumPy backend against PyTorch CPU eager, in one
run, at one thread count, on the same batches (same images, same order, batch 128, RMSprop).

    python bench/train_mnist.py [--data-dir ../shared/data/mnist] [--threads N] [--repeats 2]
                                [--limit N] [--out train_mnist]

Without --data-dir (or when the folder is missing) the bundled subset is used. Epochs of the
two frameworks alternate (ndlite, torch, ndlite, torch, ...) so that a busy machine slows both
alike; the best epoch of each is compared. Target (issue 3): ndlite <= 1.5x PyTorch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pin_threads, save, timed_steps, torch_seed_cnn  # noqa: E402


def ndlite_epoch(batches, state: dict) -> float:
    import ndlite
    from ndlite.nn import functional as F

    if "model" not in state:
        ndlite.manual_seed(0)
        state["model"] = ndlite.nn.models.mnist_cnn()
        state["opt"] = ndlite.optim.RMSprop(state["model"].parameters(), lr=1e-3)
    return timed_steps(batches, state["model"], state["opt"], F.nll_loss, ndlite.tensor)


def torch_epoch(batches, state: dict) -> float:
    import torch
    from torch.nn import functional as F

    if "model" not in state:
        state["model"] = torch_seed_cnn()
        state["opt"] = torch.optim.RMSprop(state["model"].parameters(), lr=1e-3)
    return timed_steps(batches, state["model"], state["opt"], F.nll_loss, torch.from_numpy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="first N training digits only")
    parser.add_argument("--out", default="train_mnist")
    args = parser.parse_args()
    threads = pin_threads(args.threads)

    import numpy as np

    from ndlite.data import MNIST

    if args.data_dir and Path(args.data_dir).is_dir():
        data, source = MNIST(args.data_dir), str(args.data_dir)
    else:
        data, source = MNIST.bundled(), "bundled subset"
    n = len(data) if args.limit is None else min(args.limit, len(data))
    order = np.random.default_rng(0).permutation(len(data))[:n]
    batches = [data.batch(order[i:i + 128]) for i in range(0, n, 128)]
    frameworks = {"ndlite (numpy)": (ndlite_epoch, {})}
    try:
        import torch

        torch.set_num_threads(threads)
        frameworks["torch (cpu)"] = (torch_epoch, {})
    except ImportError:
        print("PyTorch is not installed: timing ndlite only")
    print(f"seed CNN, one epoch of {n} MNIST digits ({source}), batch 128, RMSprop, "
          f"{threads} thread(s)")
    times: dict[str, list] = {name: [] for name in frameworks}
    for r in range(args.repeats):
        for name, (epoch, state) in frameworks.items():
            seconds = epoch(batches, state)
            times[name].append(seconds)
            print(f"  repeat {r + 1}: {name:15s} {seconds:7.2f} s  {n / seconds:7.0f} images/s",
                  flush=True)
    best = {name: min(ts) for name, ts in times.items()}
    result = {"source": source, "images": n, "threads": threads, "batch_size": 128,
              "epoch_seconds": times, "best_epoch_seconds": best}
    if "torch (cpu)" in best:
        ratio = best["ndlite (numpy)"] / best["torch (cpu)"]
        result["ratio_ndlite_over_torch"] = ratio
        print(f"best epoch: ndlite {best['ndlite (numpy)']:.2f} s, torch "
              f"{best['torch (cpu)']:.2f} s: ndlite / torch = {ratio:.2f} (target <= 1.5)")
    print(f"wrote {save(args.out, result)}")


if __name__ == "__main__":
    main()
