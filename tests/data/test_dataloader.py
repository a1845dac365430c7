"""DataLoader and TensorDataset: batching, seeded shuffling, drop_last, target backend."""

import numpy as np
import pytest

import ndlite
from ndlite.data import DataLoader, Dataset, TensorDataset


def test_batches_cover_the_dataset_in_order():
    ds = TensorDataset(np.arange(10.0).reshape(10, 1), np.arange(10))
    batches = list(DataLoader(ds, batch_size=4))
    assert [len(y) for _, y in batches] == [4, 4, 2]
    assert np.concatenate([y.numpy() for _, y in batches]).tolist() == list(range(10))
    assert batches[0][0].dtype == ndlite.float64 and batches[0][1].dtype == ndlite.int64
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [len(y) for _, y in DataLoader(ds, batch_size=4, drop_last=True)] == [4, 4]


def test_shuffle_is_a_seeded_permutation_that_changes_each_epoch():
    ds = TensorDataset(np.arange(20))
    a = DataLoader(ds, batch_size=20, shuffle=True, seed=7)
    b = DataLoader(ds, batch_size=20, shuffle=True, seed=7)
    first_a, second_a = [next(iter(a))[0].tolist() for _ in range(2)]
    first_b = next(iter(b))[0].tolist()
    assert first_a == first_b and sorted(first_a) == list(range(20))
    assert second_a != first_a
    ndlite.manual_seed(1)
    c = next(iter(DataLoader(ds, batch_size=20, shuffle=True)))[0].tolist()
    ndlite.manual_seed(1)
    assert next(iter(DataLoader(ds, batch_size=20, shuffle=True)))[0].tolist() == c


def test_generic_dataset_items_are_collated():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return ndlite.tensor([float(i), float(i * i)]), i % 2

    x, y = next(iter(DataLoader(Squares(), batch_size=3)))
    assert x.tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 4.0]] and y.tolist() == [0, 1, 0]


def test_batches_are_created_on_the_chosen_backend():
    ds = TensorDataset(np.ones((4, 2), np.float32))
    (x,) = next(iter(DataLoader(ds, batch_size=2, backend="numpy")))
    assert x.device == "numpy"


def test_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(TensorDataset(np.ones(3)), batch_size=0)
    with pytest.raises(ndlite.ShapeError):
        TensorDataset(np.ones(3), np.ones(4))
