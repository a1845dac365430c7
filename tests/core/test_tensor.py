"""Making tensors and getting values out: dtypes inferred like PyTorch, seeded random numbers,
conversions, repr, Python protocols."""

import numpy as np
import pytest

import ndlite
from ndlite.errors import ShapeError


def test_dtype_inference():
    assert ndlite.tensor([1.0, 2]).dtype == ndlite.float32
    assert ndlite.tensor([1, 2]).dtype == ndlite.int64
    assert ndlite.tensor([True]).dtype == ndlite.bool_
    assert ndlite.tensor(np.zeros(2)).dtype == ndlite.float64  # NumPy arrays keep theirs
    assert ndlite.tensor(np.zeros(2, np.int32)).dtype == ndlite.int32
    assert ndlite.tensor(np.float64(1.5)).dtype == ndlite.float64
    assert ndlite.tensor(3.5).shape == () and ndlite.tensor(3.5).item() == 3.5
    assert ndlite.tensor([[1, 2]], dtype="float64").dtype == ndlite.float64
    assert ndlite.tensor([1.7, -1.7], dtype=ndlite.int32).tolist() == [1, -1]


def test_tensor_copies_its_data():
    a = np.ones(3, np.float32)
    x = ndlite.tensor(a)
    a[0] = 5
    assert x.tolist() == [1.0, 1.0, 1.0]
    y = ndlite.tensor(x)
    y.add_(1)
    assert x.tolist() == [1.0, 1.0, 1.0]
    assert ndlite.as_tensor(x) is x


@pytest.mark.parametrize("make,shape,dtype", [
    (lambda: ndlite.zeros(2, 3), (2, 3), ndlite.float32),
    (lambda: ndlite.ones((4,), dtype=ndlite.int32), (4,), ndlite.int32),
    (lambda: ndlite.full((2,), 7), (2,), ndlite.int64),
    (lambda: ndlite.full([1, 2], 0.5), (1, 2), ndlite.float32),
    (lambda: ndlite.empty(3, 1), (3, 1), ndlite.float32),
    (lambda: ndlite.eye(3, 2), (3, 2), ndlite.float32),
    (lambda: ndlite.arange(5), (5,), ndlite.int64),
    (lambda: ndlite.arange(0, 1, 0.25), (4,), ndlite.float32),
    (lambda: ndlite.linspace(0, 1, 5), (5,), ndlite.float32),
    (lambda: ndlite.zeros(()), (), ndlite.float32),
    (lambda: ndlite.zeros(0, 3), (0, 3), ndlite.float32),
])
def test_creation_shapes_and_dtypes(make, shape, dtype):
    x = make()
    assert x.shape == shape and x.dtype == dtype


def test_creation_values():
    assert ndlite.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert ndlite.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert ndlite.arange(5, 1, -2).tolist() == [5, 3]
    like = ndlite.ones(2, 2, dtype=ndlite.float64)
    for fn in (ndlite.zeros_like, ndlite.ones_like, ndlite.empty_like, ndlite.rand_like,
               ndlite.randn_like):
        out = fn(like)
        assert out.shape == (2, 2) and out.dtype == ndlite.float64
    assert ndlite.full_like(like, 3).tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_random_numbers_are_seeded_and_in_range():
    ndlite.manual_seed(7)
    a, b, c = ndlite.rand(1000), ndlite.randn(1000), ndlite.randint(3, 6, (1000,))
    ndlite.manual_seed(7)
    assert (ndlite.rand(1000) == a).all().item() and (ndlite.randn(1000) == b).all().item()
    assert (ndlite.randint(3, 6, (1000,)) == c).all().item()
    assert 0 <= a.amin().item() and a.amax().item() < 1
    assert abs(b.mean().item()) < 0.15 and 0.85 < b.std().item() < 1.15
    assert set(c.tolist()) == {3, 4, 5}
    assert sorted(ndlite.randperm(6).tolist()) == list(range(6))
    with pytest.raises(ValueError):
        ndlite.manual_seed(-1)


def test_properties_and_conversions():
    x = ndlite.arange(6).reshape(2, 3)
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 6 and x.size() == (2, 3)
    assert x.size(-1) == 3 and len(x) == 2 and x.device == "numpy"
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.asarray(x).shape == (2, 3) and np.asarray(x, dtype=np.float64).dtype == np.float64
    assert [row.tolist() for row in x] == [[0, 1, 2], [3, 4, 5]]
    assert x.float().dtype == ndlite.float32 and x.double().dtype == ndlite.float64
    assert x.float().long().dtype == ndlite.int64 and x.int().dtype == ndlite.int32
    assert x.bool().dtype == ndlite.bool_ and x.to(ndlite.float32).dtype == ndlite.float32
    assert x.to("numpy") is x
    assert float(ndlite.tensor(2.5)) == 2.5 and int(ndlite.tensor(3)) == 3
    assert [10, 20, 30][ndlite.tensor(1)] == 20
    assert bool(ndlite.tensor([1.0]))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(ndlite.ones(2))
    with pytest.raises(TypeError):
        len(ndlite.tensor(1.0))


def test_numpy_shares_memory_on_the_numpy_backend_and_refuses_graph_tensors():
    x = ndlite.zeros(2)
    x.numpy()[0] = 5
    assert x.tolist() == [5.0, 0.0]
    w = ndlite.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        w.numpy()
    assert w.detach().numpy().shape == (2,)


def test_repr_reads_like_pytorch():
    assert repr(ndlite.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(ndlite.tensor([1, 2])) == "tensor([1, 2])"
    assert "dtype=float64" in repr(ndlite.zeros(1, dtype=ndlite.float64))
    assert "requires_grad=True" in repr(ndlite.zeros(1, requires_grad=True))
    y = ndlite.zeros(1, requires_grad=True) * 2
    assert "grad_fn=<MulBackward>" in repr(y)
    assert repr(ndlite.tensor(3.0)) == "tensor(3.)"
    assert repr(ndlite.tensor([[1.0, 2.0]])) == "tensor([[1., 2.]])"


def test_tensors_hash_by_identity():
    a, b = ndlite.ones(1), ndlite.ones(1)
    assert len({a, b}) == 2 and {a: 1}[a] == 1


def test_item_needs_one_element():
    assert ndlite.ones(1, 1).item() == 1.0
    with pytest.raises(ShapeError):
        ndlite.ones(2).item()


def test_copy_fill_zero_and_data():
    x = ndlite.zeros(2, 3)
    x.copy_(ndlite.arange(3))
    assert x.tolist() == [[0.0, 1.0, 2.0]] * 2
    x.fill_(ndlite.tensor(4.0))
    assert x.tolist() == [[4.0] * 3] * 2
    x.zero_()
    assert x.sum().item() == 0
    y = ndlite.ones(2, 3)
    x.data = y
    assert x.tolist() == [[1.0] * 3] * 2
    with pytest.raises(ShapeError):
        x.data = ndlite.ones(3)
