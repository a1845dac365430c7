"""Shape, selection, sorting and einsum ops against NumPy on every backend, with the errors
that name the op (the kit checks values and gradients on random inputs)."""

import numpy as np
import pytest

import ndlite

R = np.random.default_rng(0)


def test_gpt_idioms(backend):
    T = 4
    tril = ndlite.tril(ndlite.ones(T, T, backend=backend))
    att = ndlite.zeros(2, T, T, backend=backend).masked_fill(tril == 0, float("-inf"))
    probs = ndlite.nn.functional.softmax(att, dim=-1).numpy()
    np.testing.assert_allclose(probs[0, 1], [0.5, 0.5, 0, 0])
    v, i = ndlite.tensor([[1.0, 5.0, 3.0]], backend=backend).topk(2)
    assert v.tolist() == [[5.0, 3.0]] and i.tolist() == [[1, 2]]
    assert (ndlite.tensor([3, 1], backend=backend).repeat(2).tolist()) == [3, 1, 3, 1]


def test_sort_is_stable_both_ways(backend):
    x = ndlite.tensor([2.0, 1.0, 2.0, 1.0], backend=backend)
    assert x.sort().indices.tolist() == [1, 3, 0, 2]
    assert x.sort(descending=True).indices.tolist() == [0, 2, 1, 3]
    assert x.argsort(descending=True).tolist() == [0, 2, 1, 3]


def test_scans_and_products(backend):
    a = R.standard_normal((3, 4)).astype(np.float32)
    x = ndlite.tensor(a, backend=backend)
    np.testing.assert_allclose(x.cumsum(1).numpy(), np.cumsum(a, 1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.cumprod(0).numpy(), np.cumprod(a, 0), rtol=1e-6)
    np.testing.assert_allclose(x.prod(1).numpy(), np.prod(a, 1), rtol=1e-5)
    assert ndlite.tensor([True, True, False], backend=backend).cumsum(0).tolist() == [1, 2, 2]
    assert ndlite.median(ndlite.tensor([3.0, 1.0, 2.0, 4.0], backend=backend)).item() == 2.0


@pytest.mark.parametrize("equation,shapes", [
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("i,j->ij", [(2,), (3,)]), ("bi,ij,bj->b", [(2, 3), (3, 4), (2, 4)]),
    ("...ij,jk", [(2, 2, 3), (3, 4)]), ("ij,ij->", [(2, 3), (2, 3)])])
def test_einsum_matches_numpy(backend, equation, shapes):
    arrays = [R.standard_normal(s).astype(np.float32) for s in shapes]
    got = ndlite.einsum(equation, *[ndlite.tensor(a, backend=backend) for a in arrays])
    np.testing.assert_allclose(got.numpy(), np.einsum(equation, *arrays), rtol=1e-5, atol=1e-5)


def test_selection_helpers(backend):
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = ndlite.tensor(a, backend=backend)
    assert x.roll(1, 1).tolist() == np.roll(a, 1, 1).tolist()
    assert ndlite.roll(x, -1).tolist() == np.roll(a, -1).tolist()
    assert x.flip(0).tolist() == a[::-1].tolist() and x.tile((2,)).shape == (2, 6)
    assert ndlite.triu(x, 1).tolist() == np.triu(a, 1).tolist()
    i, j = ndlite.meshgrid(ndlite.arange(2, backend=backend), ndlite.arange(3, backend=backend),
                           indexing="ij")
    assert i.shape == (2, 3) and j.tolist()[1] == [0, 1, 2]
    hot = ndlite.nn.functional.one_hot(ndlite.tensor([2, 0], backend=backend), 3)
    assert hot.tolist() == [[0, 0, 1], [1, 0, 0]] and hot.dtype == ndlite.int64
    np.testing.assert_allclose(x.norm().item(), np.linalg.norm(a), rtol=1e-6)
    np.testing.assert_allclose(ndlite.linalg.vector_norm(x, 1, dim=1).numpy(), [3, 12])
    index = ndlite.tensor([[0, 1, 0]], backend=backend)
    added = ndlite.zeros(2, 3, backend=backend).scatter_add(0, index, x)
    assert added.tolist() == [[0.0, 0.0, 2.0], [0.0, 1.0, 0.0]]
    filled = ndlite.zeros(2, 3, backend=backend).scatter_(
        1, ndlite.tensor([[2], [0]], backend=backend), 7.0)
    assert filled.tolist() == [[0, 0, 7], [7, 0, 0]]


def test_errors_name_the_op():
    x = ndlite.ones(3)
    with pytest.raises(ndlite.ShapeError, match="tril"):
        ndlite.tril(x)
    with pytest.raises(IndexError, match="one_hot"):
        ndlite.nn.functional.one_hot(ndlite.tensor([0, 3]), 3)
    with pytest.raises(ndlite.ShapeError, match="topk"):
        x.topk(4)
    with pytest.raises(ndlite.ShapeError, match="einsum"):
        ndlite.einsum("ij,jk->ik", ndlite.ones(2, 3), ndlite.ones(4, 2))
    with pytest.raises(ndlite.DTypeError, match="masked_fill"):
        x.masked_fill(x, 0.0)
    with pytest.raises(ndlite.ShapeError, match="repeat"):
        ndlite.ones(2, 2).repeat(2)
    with pytest.raises(IndexError, match="sort"):
        x.sort(dim=2)
