"""DistributedSampler: each rank's share of a dataset's indices, with torch's rules.

Every rank draws the same permutation (from `seed + epoch`), pads it by repeating its start
until its length is a multiple of the number of ranks (or, with drop_last, cuts the tail),
and takes every num_replicas-th index from its rank on. The shares are disjoint apart from
the padding, cover the dataset, and are equally long, so every rank runs the same number of
steps. One difference from torch: the permutation comes from NumPy's generator
(default_rng(seed + epoch)), not torch's randperm.
"""

from __future__ import annotations

import math
import numbers

import numpy as np


class DistributedSampler:
    """Indices of `dataset` for rank `rank` of `num_replicas` (default: the process group's).
    Call `set_epoch(epoch)` before each epoch for a new shuffle.

    >>> s = DistributedSampler(range(10), num_replicas=4, rank=1, shuffle=False)
    >>> list(s), len(s)
    ([1, 5, 9], 3)
    >>> list(DistributedSampler(range(10), num_replicas=4, rank=3, shuffle=False))
    [3, 7, 1]
    >>> list(DistributedSampler(range(10), num_replicas=4, rank=3, shuffle=False,
    ...                         drop_last=True))
    [3, 7]
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            from ..distributed import get_rank, get_world_size

            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got "
                             f"{num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in the "
                             f"interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = shuffle, int(seed), drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch."""
        n = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            order = np.arange(n)
        if not self.drop_last:
            padding = self.total_size - n
            if padding > 0:
                order = np.concatenate([order, np.resize(order, padding)])
        else:
            order = order[:self.total_size]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Shuffle differently in the next pass (every rank must set the same epoch)."""
        self.epoch = int(epoch)


class BatchSampler:
    """Groups the indices of `sampler` into lists of `batch_size`, dropping the last short
    list with `drop_last` (PyTorch's BatchSampler; pass one to `DataLoader(batch_sampler=)`).

    >>> list(BatchSampler(range(5), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    >>> len(BatchSampler(range(5), batch_size=2, drop_last=True))
    2
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                or batch_size <= 0):
            raise ValueError(f"BatchSampler: batch_size should be a positive integer value, "
                             f"but got batch_size={batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, but got "
                             f"drop_last={drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(int(index))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
