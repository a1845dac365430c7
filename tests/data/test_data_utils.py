"""torch.utils.data's names: the ndlite.utils.data alias, batch_sampler, collate_fn, worker
processes (same batches, same order as in-process), random_split, Subset, ConcatDataset."""

import numpy as np
import pytest

import ndlite
from ndlite.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    Subset,
    TensorDataset,
    random_split,
)


class Squares(Dataset):
    """A dataset without a `batch` method, so items go through collation one by one."""

    def __len__(self):
        return 11

    def __getitem__(self, i):
        return np.array([i, i * i], dtype=np.float32), i % 3


def sum_collate(items):
    """Module-level, so a spawned worker can unpickle it."""
    return np.stack([x for x, _ in items]).sum(axis=0)


def _lists(loader):
    return [tuple(t.tolist() for t in batch) for batch in loader]


def test_utils_data_is_the_data_module():
    import ndlite.utils.data
    from ndlite.utils.data import DataLoader, Dataset, TensorDataset

    assert ndlite.utils.data is ndlite.data
    assert (DataLoader, Dataset, TensorDataset) == (ndlite.data.DataLoader, ndlite.data.Dataset,
                                                    ndlite.data.TensorDataset)


def test_batch_sampler_gives_whole_batches():
    ds = TensorDataset(np.arange(6) * 10)
    loader = DataLoader(ds, batch_sampler=[[5, 0], [1, 2, 3], [4]])
    assert len(loader) == 3
    assert [b.tolist() for (b,) in loader] == [[50, 0], [10, 20, 30], [40]]
    batches = BatchSampler(range(5), batch_size=2, drop_last=True)
    assert [b.tolist() for (b,) in DataLoader(ds, batch_sampler=batches)] == [[0, 10], [20, 30]]
    for bad in ({"batch_size": 2}, {"shuffle": True}, {"drop_last": True},
                {"sampler": range(6)}):
        with pytest.raises(ValueError, match="DataLoader: batch_sampler option is mutually"):
            DataLoader(ds, batch_sampler=[[0]], **bad)
    with pytest.raises(ValueError, match="BatchSampler: batch_size .* batch_size=0"):
        BatchSampler(range(3), batch_size=0, drop_last=False)


def test_collate_fn_output_is_yielded_as_it_is():
    loader = DataLoader(Squares(), batch_size=4, collate_fn=lambda items: len(items))
    assert list(loader) == [4, 4, 3]
    x, y = next(iter(DataLoader(Squares(), batch_size=2, collate_fn=ndlite.data.default_collate)))
    assert x.tolist() == [[0.0, 0.0], [1.0, 1.0]] and y.tolist() == [0, 1]
    DataLoader(Squares(), pin_memory=True)  # accepted, does nothing


def test_workers_give_the_same_batches_in_order():
    ds = TensorDataset(np.arange(40.0).reshape(20, 2), np.arange(20))
    kwargs = {"batch_size": 3, "shuffle": True, "seed": 5}
    inline = _lists(DataLoader(ds, **kwargs))
    assert _lists(DataLoader(ds, num_workers=2, **kwargs)) == inline
    # Items collated one by one in the workers, and a collate_fn run there.
    assert _lists(DataLoader(Squares(), batch_size=2, num_workers=2)) == _lists(
        DataLoader(Squares(), batch_size=2))
    sums = DataLoader(Squares(), batch_size=4, num_workers=2, collate_fn=sum_collate)
    assert [s.tolist() for s in sums] == [[6.0, 14.0], [22.0, 126.0], [27.0, 245.0]]
    with pytest.raises(ValueError, match="num_workers option should be non-negative.*-1"):
        DataLoader(ds, num_workers=-1)


def test_random_split_lengths_and_fractions():
    parts = random_split(range(10), [3, 7], generator=ndlite.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    # Fractions: floor each, then the remainder round-robin from the first (PyTorch's rule).
    assert [len(p) for p in random_split(range(10), [0.33, 0.33, 0.34], generator=1)] == [4, 3, 3]
    assert [len(p) for p in random_split(range(5), [0.5, 0.5], generator=1)] == [3, 2]
    with pytest.raises(ValueError, match=r"random_split: sum of input lengths \(9\)"):
        random_split(range(10), [4, 5])
    with pytest.raises(ValueError, match="random_split: fraction at index 1"):
        random_split(range(10), [0.5, 1.5, -1.0])


def test_random_split_is_deterministic_for_a_seed():
    def split(generator):
        return [p.indices for p in random_split(range(30), [10, 20], generator=generator)]

    assert split(3) == split(3) and split(3) != split(4)
    assert split(ndlite.Generator().manual_seed(3)) == split(ndlite.Generator().manual_seed(3))
    ndlite.manual_seed(2)
    first = split(None)
    ndlite.manual_seed(2)
    assert split(None) == first


def test_subset_indexes_and_batches_through_its_dataset():
    ds = TensorDataset(np.arange(10) * 2)
    sub = Subset(ds, [9, 1, 4])
    assert len(sub) == 3 and sub[0][0].item() == 18 and sub[-1][0].item() == 8
    assert [t[0].item() for t in sub[[2, 0]]] == [8, 18]
    assert [b.tolist() for (b,) in DataLoader(sub, batch_size=2)] == [[18, 2], [8]]
    plain = Subset(Squares(), [3, 2])
    assert not hasattr(plain, "batch")
    assert [y.tolist() for _, y in DataLoader(plain, batch_size=2)] == [[0, 2]]


def test_concat_dataset_indexing():
    a, b = TensorDataset(np.arange(3)), TensorDataset(np.arange(4) + 100)
    cat = ConcatDataset([a, b])
    assert len(cat) == 7 and cat.cumulative_sizes == [3, 7]
    assert [cat[i][0].item() for i in range(7)] == [0, 1, 2, 100, 101, 102, 103]
    assert cat[-1][0].item() == 103 and cat[-7][0].item() == 0 and cat[-5][0].item() == 2
    for bad in (7, -8):
        with pytest.raises(IndexError, match=f"ConcatDataset: index {bad} is out of range"):
            cat[bad]
    with pytest.raises(TypeError, match="ConcatDataset: index must be an integer"):
        cat[1.5]
    with pytest.raises(ValueError, match="ConcatDataset: datasets should not be an empty"):
        ConcatDataset([])
    assert [y.tolist() for (y,) in DataLoader(cat, batch_size=4)] == [[0, 1, 2, 100],
                                                                       [101, 102, 103]]


def test_workers_stop_cleanly_when_the_loop_breaks_early():
    sub = Subset(TensorDataset(np.arange(30)), list(range(29, -1, -1)))
    loader = DataLoader(sub, batch_size=2, num_workers=2)
    seen = []
    for (batch,) in loader:
        seen.append(batch.tolist())
        if len(seen) == 2:
            break
    assert seen == [[29, 28], [27, 26]]
