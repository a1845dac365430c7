"""Datasets: anything with `__len__` and `__getitem__`. A dataset may also offer
`batch(indices) -> tuple of NumPy arrays`, which the DataLoader then uses to build a whole
batch in one indexing operation instead of one item at a time. Subset, ConcatDataset and
random_split combine datasets with PyTorch's semantics."""

from __future__ import annotations

import bisect
import math
import numbers

import numpy as np

from ..creation import rng, tensor
from ..errors import ShapeError
from ..tensor import Tensor


class Dataset:
    """Base class: subclasses implement `__getitem__(index)` and `__len__()`."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class TensorDataset(Dataset):
    """Samples are the rows of tensors (or arrays) that share their first dim.

    >>> import ndlite
    >>> ds = ndlite.data.TensorDataset(ndlite.arange(6.0).reshape(3, 2), ndlite.tensor([0, 1, 0]))
    >>> len(ds), ds[1][0].tolist(), ds[1][1].item()
    (3, [2.0, 3.0], 1)
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        self.arrays = [t.detach().numpy() if isinstance(t, Tensor) else np.asarray(t)
                       for t in tensors]
        n = len(self.arrays[0]) if self.arrays[0].ndim else None
        for a in self.arrays:
            if a.ndim == 0 or len(a) != n:
                raise ShapeError(f"TensorDataset: all tensors need the same first dim, got "
                                 f"shapes {[x.shape for x in self.arrays]}")
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(tensor(a[index]) for a in self.arrays)

    def batch(self, indices: np.ndarray) -> tuple:
        return tuple(a[indices] for a in self.arrays)

    def __getstate__(self) -> dict:
        # Tensors do not pickle (they hold their backend); a DataLoader worker needs only the
        # host arrays, so a pickled TensorDataset keeps those, also as its `tensors`.
        return {"arrays": self.arrays}

    def __setstate__(self, state: dict) -> None:
        self.arrays = state["arrays"]
        self.tensors = tuple(self.arrays)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order (PyTorch's Subset).

    >>> import ndlite
    >>> sub = ndlite.data.Subset(ndlite.data.TensorDataset(ndlite.arange(5.0) * 10), [4, 0])
    >>> len(sub), sub[0][0].item(), sub[-1][0].item()
    (2, 40.0, 0.0)
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return [self.dataset[self.indices[i]] for i in idx]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)

    def __getattr__(self, name):
        # The DataLoader's one-indexing fast path, where the wrapped dataset has one.
        if name == "batch" and hasattr(self.__dict__.get("dataset"), "batch"):
            return lambda idx: self.dataset.batch(np.asarray(self.indices, np.int64)[idx])
        raise AttributeError(f"'Subset' object has no attribute {name!r}")


class ConcatDataset(Dataset):
    """The samples of several datasets one after another (PyTorch's ConcatDataset).

    >>> import ndlite
    >>> a = ndlite.data.TensorDataset(ndlite.arange(3.0))
    >>> b = ndlite.data.TensorDataset(ndlite.arange(2.0) + 10)
    >>> cat = ndlite.data.ConcatDataset([a, b])
    >>> len(cat), cat[3][0].item(), cat[-1][0].item(), cat.cumulative_sizes
    (5, 10.0, 11.0, [3, 5])
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        n = len(self)
        if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
            raise TypeError(f"ConcatDataset: index must be an integer, got {idx!r}")
        if not -n <= idx < n:
            raise IndexError(f"ConcatDataset: index {idx} is out of range for a dataset of "
                             f"length {n}")
        idx = int(idx) + n if idx < 0 else int(idx)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


def _split_lengths(n: int, lengths) -> list[int]:
    """PyTorch's rule: fractions summing to 1 become floor(n * f) each, and the remainder is
    dealt one by one round-robin from the first; otherwise lengths must sum to n."""
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and "
                                 f"1, got {frac!r}")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if any(not isinstance(k, numbers.Integral) or k < 0 for k in lengths):
        raise ValueError(f"random_split: lengths must be non-negative integers or fractions "
                         f"summing to 1, got {lengths!r}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal "
                         f"the length of the input dataset ({n})")
    return [int(k) for k in lengths]


def random_split(dataset, lengths, generator=None) -> list[Subset]:
    """Split `dataset` into disjoint random Subsets of the given `lengths` (or fractions of
    its length that sum to 1). `generator` is an `ndlite.Generator` or an integer seed; by
    default the global stream (`ndlite.manual_seed`) draws the permutation.

    >>> import ndlite
    >>> train, val = ndlite.data.random_split(range(10), [0.8, 0.2], generator=0)
    >>> len(train), len(val), sorted(train.indices + val.indices) == list(range(10))
    (8, 2, True)
    """
    counts = _split_lengths(len(dataset), lengths)
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        host = np.random.default_rng(int(generator))
    else:
        host = rng(generator)
    order = host.permutation(sum(counts)).tolist()
    bounds = np.cumsum([0] + counts).tolist()
    return [Subset(dataset, order[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
