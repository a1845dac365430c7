"""Character-level text for language models: a vocabulary of the characters that occur, the
text as int64 token ids, a train/validation split, and random (B, T) windows of both.

`CharText.bundled()` reads the 200,000-character sample of tiny shakespeare that ships with
ndlite (tools/make_text_sample.py), so `ndlite train gpt` runs offline; `CharText.from_file`
reads any UTF-8 file, such as the full 1.1 MB tiny shakespeare.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from ..creation import tensor

BUNDLED = Path(__file__).with_name("shakespeare_200k.txt.gz")


class CharText:
    """`text` as token ids over its sorted characters; the first `train_fraction` of it
    trains, the rest validates.

    >>> import ndlite
    >>> data = ndlite.data.CharText("hello world, hello")
    >>> data.vocab_size, data.decode(data.encode("hello"))
    (9, 'hello')
    """

    def __init__(self, text: str, train_fraction: float = 0.9):
        if len(text) < 2:
            raise ValueError(f"CharText: need at least 2 characters of text, got {len(text)}")
        if not 0 < train_fraction <= 1:
            raise ValueError(f"CharText: train_fraction must be in (0, 1], got {train_fraction}")
        self.chars = sorted(set(text))
        self._index = {c: i for i, c in enumerate(self.chars)}
        self.data = self.encode(text)
        cut = int(train_fraction * len(self.data))
        self.train, self.val = self.data[:cut], self.data[cut:]

    @classmethod
    def from_file(cls, path, train_fraction: float = 0.9) -> CharText:
        with open(path, encoding="utf-8") as f:
            return cls(f.read(), train_fraction)

    @classmethod
    def bundled(cls, train_fraction: float = 0.9) -> CharText:
        return cls(gzip.decompress(BUNDLED.read_bytes()).decode("utf-8"), train_fraction)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        try:
            return np.array([self._index[c] for c in text], dtype=np.int64)
        except KeyError as exc:
            raise ValueError(f"CharText.encode: character {exc.args[0]!r} is not in the "
                             f"vocabulary of {self.vocab_size}") from None

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def batch(self, split: str, batch_size: int, block_size: int, rng, backend=None):
        """(inputs, targets), each (batch_size, block_size) int64: random windows of the split
        and the same windows shifted by one character."""
        ids = {"train": self.train, "val": self.val}[split]
        if len(ids) <= block_size:
            raise ValueError(f"CharText.batch: the {split} split has {len(ids)} characters, "
                             f"too few for windows of {block_size} + 1")
        starts = rng.integers(0, len(ids) - block_size, size=batch_size)
        rows = starts[:, None] + np.arange(block_size + 1)
        windows = ids[rows]
        return (tensor(windows[:, :-1], backend=backend),
                tensor(windows[:, 1:], backend=backend))
