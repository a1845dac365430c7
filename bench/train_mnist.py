"""Epoch time of the seed CNN on MNIST: ndlite's NumPy backend against PyTorch CPU eager, in one
run, at one thread count, on the same batches (same images, same order, batch 128, RMSprop).
The measuring is `ndlite bench train` (ndlite/cli/bench/train.py); this script keeps its
result in bench/results/.

    python bench/train_mnist.py [--data-dir ../shared/data/mnist] [--threads N] [--repeats 2]
                                [--limit N] [--out train_mnist]

Without --data-dir (or when the folder is missing) the bundled subset is used. Epochs of the
two frameworks alternate so that a busy machine slows both alike; the best epoch of each is
compared. Without PyTorch the run is partial (bench/results/<out>.partial.json). Target
(issue 3): ndlite <= 1.5x PyTorch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_cli  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="train_mnist", help="results name in bench/results")
    parser.add_argument("--data-dir", default=None)
    args, rest = parser.parse_known_args(argv)
    if args.data_dir and Path(args.data_dir).is_dir():
        rest += ["--data-dir", args.data_dir]
    elif args.data_dir:
        print(f"{args.data_dir} is not a folder: timing the bundled subset")
    return run_cli("train", args.out, rest)


if __name__ == "__main__":
    sys.exit(main())
