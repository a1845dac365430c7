"""Random sampling with PyTorch's names: same numbers on every backend for one seed, Generator
streams, multinomial with and without replacement, in-place fills, and clear errors."""

import numpy as np
import pytest

import ndlite


def test_same_numbers_on_every_backend(backend):
    draws = []
    for where in ("numpy", backend):
        ndlite.manual_seed(3)
        w = ndlite.tensor([[0.1, 0.2, 0.7], [1.0, 1.0, 1.0]], backend=where)
        x = ndlite.empty(4, backend=where)
        draws.append([ndlite.multinomial(w, 3).tolist(), x.uniform_(-1, 1).tolist(),
                      x.normal_(0, 2).tolist(), ndlite.bernoulli(w / 2).tolist(),
                      ndlite.normal(ndlite.zeros(2, backend=where), 1.0).tolist(),
                      ndlite.randint(10, (3,), backend=where).tolist()])
    assert draws[0] == draws[1]


def test_generators_are_separate_streams():
    g1, g2 = ndlite.Generator().manual_seed(7), ndlite.Generator().manual_seed(7)
    ndlite.manual_seed(0)
    a = ndlite.randn(3, generator=g1)
    ndlite.rand(5)  # the global stream does not move g2
    assert a.tolist() == ndlite.randn(3, generator=g2).tolist()
    assert g1.initial_seed() == 7


def test_multinomial_rules():
    ndlite.manual_seed(0)
    w = ndlite.tensor([0.0, 1.0, 1.0, 0.0])
    picks = ndlite.multinomial(w, 2)
    assert sorted(picks.tolist()) == [1, 2] and picks.dtype == ndlite.int64
    many = ndlite.multinomial(w, 50, replacement=True).numpy()
    assert set(np.unique(many)) <= {1, 2}
    with pytest.raises(ValueError, match="without replacement"):
        ndlite.multinomial(w, 3)
    with pytest.raises(ValueError, match="non-negative"):
        ndlite.multinomial(ndlite.tensor([-1.0, 2.0]), 1)
    with pytest.raises(ndlite.ShapeError, match="multinomial"):
        ndlite.multinomial(ndlite.ones(2, 2, 2), 1)


def test_in_place_fills():
    x = ndlite.empty(1000)
    assert -1 <= x.uniform_(-1, 1).min().item() and x.max().item() < 1
    assert set(np.unique(x.bernoulli_(0.3).numpy())) <= {0.0, 1.0}
    assert set(np.unique(x.random_(3).numpy())) <= {0.0, 1.0, 2.0}
    assert x.exponential_().min().item() >= 0
