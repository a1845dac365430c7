"""Datasets: anything with `__len__` and `__getitem__`. A dataset may also offer
`batch(indices) -> tuple of NumPy arrays`, which the DataLoader then uses to build a whole
batch in one indexing operation instead of one item at a time."""

from __future__ import annotations

import numpy as np

from ..creation import tensor
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
