"""DistributedSampler: torch's index rules (padding, strides, drop_last, seed + epoch) and the
shares it gives: disjoint, covering, equally long; DataLoader(sampler=)."""

import math

import numpy as np
import pytest

import ndlite
from ndlite.data import DataLoader, DistributedSampler, TensorDataset


def _shares(n, replicas, **kw):
    return [list(DistributedSampler(range(n), num_replicas=replicas, rank=r, **kw))
            for r in range(replicas)]


@pytest.mark.parametrize("n,replicas", [(10, 2), (10, 3), (10, 4), (7, 7), (3, 5), (1, 2),
                                        (100, 8)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_shares_are_equal_disjoint_up_to_padding_and_cover_the_dataset(n, replicas, shuffle):
    shares = _shares(n, replicas, shuffle=shuffle, seed=3)
    per_rank = -(-n // replicas)
    assert all(len(s) == per_rank for s in shares)
    every = [i for s in shares for i in s]
    assert sorted(set(every)) == list(range(n))  # covering
    assert len(every) - n == per_rank * replicas - n  # only the padding repeats
    # the padded order, read back rank by rank, is the permutation followed by its start
    order = [shares[k % replicas][k // replicas] for k in range(per_rank * replicas)]
    assert order[n:] == list(np.resize(order[:n], per_rank * replicas - n))


@pytest.mark.parametrize("n,replicas", [(10, 4), (10, 3), (12, 4), (2, 3)])
def test_drop_last_cuts_the_tail_instead(n, replicas):
    shares = _shares(n, replicas, shuffle=False, drop_last=True)
    per_rank = math.ceil((n - replicas) / replicas) if n % replicas else n // replicas  # torch's
    assert all(len(s) == per_rank for s in shares)
    every = [i for s in shares for i in s]
    assert len(set(every)) == len(every) == per_rank * replicas


def test_torch_layout_without_shuffle():
    # torch.utils.data.DistributedSampler(range(10), 4, r, shuffle=False), written out
    assert _shares(10, 4, shuffle=False) == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert _shares(10, 4, shuffle=False, drop_last=True) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert _shares(3, 5, shuffle=False) == [[0], [1], [2], [0], [1]]


def test_against_torch_when_installed():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional check)")
    from torch.utils.data import DistributedSampler as TorchSampler

    for n, replicas, drop_last in [(10, 4, False), (10, 4, True), (3, 5, False), (17, 3, True)]:
        for r in range(replicas):
            ours = DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop_last)
            theirs = TorchSampler(range(n), replicas, r, shuffle=False, drop_last=drop_last)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
    assert torch is not None


def test_set_epoch_reshuffles_the_same_way_on_every_rank():
    a = DistributedSampler(range(50), num_replicas=2, rank=0, seed=7)
    b = DistributedSampler(range(50), num_replicas=2, rank=1, seed=7)
    first = list(a) + list(b)
    a.set_epoch(1)
    b.set_epoch(1)
    second = list(a) + list(b)
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != second
    assert list(DistributedSampler(range(50), 2, 0, seed=7)) == first[:25]  # reproducible
    assert list(DistributedSampler(range(50), 2, 0, seed=8)) != first[:25]


def test_bad_rank_and_no_process_group():
    with pytest.raises(ValueError, match="invalid rank 2"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ndlite.distributed.DistributedError, match="not initialized"):
        DistributedSampler(range(4))


def test_dataloader_takes_the_sampler_order():
    ds = TensorDataset(ndlite.arange(10.0), ndlite.arange(10))
    sampler = DistributedSampler(ds, num_replicas=3, rank=2, shuffle=False)
    loader = DataLoader(ds, batch_size=2, sampler=sampler)
    assert len(loader) == 2
    assert [y.tolist() for _, y in loader] == [[2, 5], [8, 1]]
    with pytest.raises(ValueError, match="sampler and shuffle"):
        DataLoader(ds, batch_size=2, sampler=sampler, shuffle=True)
