"""DataLoader: batches of a dataset as tensors on a chosen backend, with PyTorch's arguments:
shuffled with a seed (reproducible epoch after epoch) or in the order of a `sampler`
(DistributedSampler), or batches given whole by a `batch_sampler`; `drop_last`; a
`collate_fn`; and `num_workers` spawned worker processes that return batches in order."""

from __future__ import annotations

import numbers

import numpy as np

from ..creation import generator
from ..device.registry import get_backend
from .collate import to_tensors
from .sampler import BatchSampler
from .workers import fetch, fetch_in_workers


def _check_arguments(batch_size, shuffle, sampler, batch_sampler, drop_last, num_workers):
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                             "batch_size, shuffle, sampler, and drop_last")
    elif (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
          or batch_size <= 0):
        raise ValueError(f"DataLoader: batch_size must be a positive integer, got "
                         f"{batch_size!r}")
    if sampler is not None and shuffle:
        raise ValueError("DataLoader: sampler and shuffle=True exclude each other (the "
                         "sampler decides the order)")
    if (isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral)
            or num_workers < 0):
        raise ValueError(f"DataLoader: num_workers option should be non-negative; use "
                         f"num_workers=0 to disable multiprocessing, got {num_workers!r}")


class DataLoader:
    """Iterate over `dataset` in batches of tensors created on `backend` (default: the
    current one). `shuffle` draws a new order each epoch from `seed` (or, without a seed,
    from ndlite's generator, which `ndlite.manual_seed` controls). A `sampler` (an iterable
    of dataset indices with a length, such as DistributedSampler) gives the order instead; a
    `batch_sampler` (an iterable of lists of indices) gives whole batches.

    `collate_fn(list of samples)` makes a batch, which is then yielded as it is; without one,
    samples are stacked into tensors (a dataset with a `batch(indices)` method, such as
    TensorDataset, is indexed once per batch). `num_workers > 0` fetches and collates in that
    many spawned processes (the dataset and collate_fn must pickle, and collate_fn must return
    picklable values such as NumPy arrays); the batches come back in the same order as with
    `num_workers=0`. `pin_memory` is accepted for PyTorch's signature and does nothing: batches
    are copied to the backend as they are made.

    >>> import ndlite
    >>> ds = ndlite.data.TensorDataset(ndlite.arange(10.0), ndlite.arange(10))
    >>> [x.tolist() for x, _ in ndlite.data.DataLoader(ds, batch_size=4)]
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    >>> len(ndlite.data.DataLoader(ds, batch_size=4, drop_last=True))
    2
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool = False,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False,
                 seed: int | None = None, backend=None, prefetch_factor: int = 2):
        _check_arguments(batch_size, shuffle, sampler, batch_sampler, drop_last, num_workers)
        self.dataset, self.sampler, self.batch_sampler = dataset, sampler, batch_sampler
        self.batch_size = None if batch_sampler is not None else int(batch_size)
        self.shuffle, self.drop_last, self.backend = shuffle, drop_last, backend
        self.num_workers, self.collate_fn = int(num_workers), collate_fn
        self.pin_memory, self.prefetch_factor = pin_memory, int(prefetch_factor)
        self._rng = np.random.default_rng(seed) if seed is not None else None

    def __len__(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self) -> np.ndarray:
        if self.sampler is not None:
            return np.fromiter(iter(self.sampler), dtype=np.int64)
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        if self._rng is not None:
            return self._rng.permutation(n)
        return generator().permutation(n)

    def _batches(self):
        """This epoch's batches, each a list of dataset indices."""
        if self.batch_sampler is not None:
            return iter(self.batch_sampler)
        return iter(BatchSampler(self._order().tolist(), self.batch_size, self.drop_last))

    def __iter__(self):
        if self.num_workers == 0:
            made = (fetch(self.dataset, list(b), self.collate_fn) for b in self._batches())
        else:
            made = fetch_in_workers(self.dataset, self._batches(), self.collate_fn,
                                    self.num_workers, self.num_workers * self.prefetch_factor)
        if self.collate_fn is not None:
            yield from made
            return
        backend = get_backend(self.backend)
        for arrays in made:
            yield to_tensors(arrays, backend)
