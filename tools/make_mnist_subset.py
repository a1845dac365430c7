"""Build the MNIST subset bundled in ndlite/data/mnist_subset/ from the full IDX files.

    python tools/make_mnist_subset.py [--source ../shared/data/mnist] [--train 6000] [--test 1000]

A class-balanced random sample (seed 0) of each split, written as gzip IDX files with the
standard names (mtime 0, so the output is byte-for-byte reproducible). The digits are real
MNIST (CC BY-SA 3.0, LeCun, Cortes and Burges).
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np

from ndlite.data.mnist import BUNDLED, FILES, load_split


def balanced_sample(labels: np.ndarray, count: int, rng) -> np.ndarray:
    per_class = count // 10
    picks = [rng.choice(np.flatnonzero(labels == c), per_class, replace=False)
             for c in range(10)]
    return np.sort(np.concatenate(picks))


def write_idx(path: Path, array: np.ndarray, magic: int) -> None:
    header = magic.to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in array.shape)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                filename="") as f:
        f.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="../shared/data/mnist")
    parser.add_argument("--train", type=int, default=6000)
    parser.add_argument("--test", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    BUNDLED.mkdir(exist_ok=True)
    for split, count in (("train", args.train), ("test", args.test)):
        images, labels = load_split(Path(args.source), split)
        keep = balanced_sample(labels, count, rng)
        write_idx(BUNDLED / (FILES[(split, "images")] + ".gz"), images[keep], 2051)
        write_idx(BUNDLED / (FILES[(split, "labels")] + ".gz"), labels[keep], 2049)
        print(f"{split}: {len(keep)} digits")


if __name__ == "__main__":
    main()
