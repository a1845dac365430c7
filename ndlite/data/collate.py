"""Collation: a list of samples (tuples of tensors, arrays or numbers) stacked into a batch.
`collate_numpy` gives NumPy arrays (what worker processes send back); `default_collate`,
PyTorch's name, gives tensors."""

from __future__ import annotations

import numbers

import numpy as np

from ..creation import tensor
from ..tensor import Tensor


def collate_numpy(items: list):
    """Stack a list of samples (tuples of arrays/tensors/numbers) into tuples of arrays."""
    first = items[0]
    if isinstance(first, (tuple, list)):
        return tuple(collate_numpy([item[i] for item in items]) for i in range(len(first)))
    if isinstance(first, Tensor):
        return np.stack([t.detach().numpy() for t in items])
    if isinstance(first, numbers.Integral) and not isinstance(first, bool):
        return np.asarray(items, dtype=np.int64)
    return np.asarray(items)


def to_tensors(arrays, backend=None):
    """A collated batch of arrays (or a tuple of them) as tensors on `backend`."""
    if isinstance(arrays, tuple):
        return tuple(tensor(a, backend=backend) for a in arrays)
    return tensor(arrays, backend=backend)


def default_collate(batch: list):
    """PyTorch's default collation: samples stacked into tensors, one per field.

    >>> import ndlite
    >>> samples = [(ndlite.tensor([1.0, 2.0]), 0), (ndlite.tensor([3.0, 4.0]), 1)]
    >>> x, y = ndlite.data.default_collate(samples)
    >>> x.tolist(), y.tolist()
    ([[1.0, 2.0], [3.0, 4.0]], [0, 1])
    """
    return to_tensors(collate_numpy(batch))
