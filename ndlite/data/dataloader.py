"""DataLoader: batches of a dataset as tensors on a chosen backend, optionally shuffled with
a seed (reproducible epoch after epoch) or in the order of a sampler (DistributedSampler),
optionally dropping the last incomplete batch."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..creation import generator, tensor
from ..device.registry import get_backend
from ..tensor import Tensor


def _collate(items: list):
    """Stack a list of samples (tuples of arrays/tensors/numbers) into tuples of arrays."""
    first = items[0]
    if isinstance(first, (tuple, list)):
        return tuple(_collate([item[i] for item in items]) for i in range(len(first)))
    if isinstance(first, Tensor):
        return np.stack([t.detach().numpy() for t in items])
    if isinstance(first, numbers.Integral) and not isinstance(first, bool):
        return np.asarray(items, dtype=np.int64)
    return np.asarray(items)


class DataLoader:
    """Iterate over `dataset` in batches of tensors created on `backend` (default: the
    current one). `shuffle` draws a new order each epoch from `seed` (or, without a seed,
    from ndlite's generator, which `ndlite.manual_seed` controls). A `sampler` (an iterable
    of dataset indices with a length, such as DistributedSampler) gives the order instead.

    >>> import ndlite
    >>> ds = ndlite.data.TensorDataset(ndlite.arange(10.0), ndlite.arange(10))
    >>> [x.tolist() for x, _ in ndlite.data.DataLoader(ds, batch_size=4)]
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    >>> len(ndlite.data.DataLoader(ds, batch_size=4, drop_last=True))
    2
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, seed: int | None = None, backend=None,
                 sampler=None):
        if not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got "
                             f"{batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler and shuffle=True exclude each other (the "
                             "sampler decides the order)")
        self.sampler = sampler
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last, self.backend = shuffle, drop_last, backend
        self._rng = np.random.default_rng(seed) if seed is not None else None

    def __len__(self) -> int:
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def _order(self) -> np.ndarray:
        if self.sampler is not None:
            return np.fromiter(iter(self.sampler), dtype=np.int64)
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        if self._rng is not None:
            return self._rng.permutation(n)
        return generator().permutation(n)

    def __iter__(self):
        backend = get_backend(self.backend)
        order = self._order()
        for b in range(len(self)):
            indices = order[b * self.batch_size:(b + 1) * self.batch_size]
            if hasattr(self.dataset, "batch"):
                arrays = self.dataset.batch(indices)
            else:
                arrays = _collate([self.dataset[int(i)] for i in indices])
            if isinstance(arrays, tuple):
                yield tuple(tensor(a, backend=backend) for a in arrays)
            else:
                yield tensor(arrays, backend=backend)
