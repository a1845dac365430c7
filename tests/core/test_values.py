"""Forward values against NumPy, the independent reference: broadcasting, reductions with
dims, matmul in every rank combination, movement, and NumPy's full indexing semantics."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ndlite
from ndlite.testing.samplers import arrays, shapes
from ndlite.testing.samplers_index import _index_key


def t(a):
    return ndlite.tensor(a)


float_arrays = shapes().flatmap(lambda s: arrays(np.float32, s))


@given(data=st.data())
@pytest.mark.parametrize("name,fn", [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("maximum", np.maximum),
    ("minimum", np.minimum), ("lt", np.less), ("ge", np.greater_equal), ("eq", np.equal),
])
def test_binary_ops_broadcast_like_numpy(name, fn, data):
    pair = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
    a = data.draw(arrays(np.float32, pair.input_shapes[0]))
    b = data.draw(arrays(np.float32, pair.input_shapes[1]))
    out = getattr(ndlite, name)(t(a), t(b))
    expected = fn(a, b)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out.numpy(), expected)


@given(a=float_arrays)
def test_unary_ops_match_numpy(a):
    x = t(a)
    for ours, theirs in [(x.exp(), np.exp(a)), (x.tanh(), np.tanh(a)), (x.abs(), np.abs(a)),
                         (x.sign(), np.sign(a)), (x.relu(), np.maximum(a, 0)), (-x, -a)]:
        np.testing.assert_array_equal(ours.numpy(), theirs)
    sig = 1 / (1 + np.exp(-a.astype(np.float64)))
    np.testing.assert_allclose(x.sigmoid().numpy(), sig, rtol=1e-6, atol=1e-7)


@given(a=float_arrays, data=st.data())
def test_reductions_match_numpy(a, data):
    nd = a.ndim
    dim = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1) if nd else st.none()))
    keep = data.draw(st.booleans())
    x = t(a)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(x.sum(dim, keepdim=keep).numpy(),
                               a64.sum(axis=dim, keepdims=keep), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.mean(dim, keepdim=keep).numpy(),
                               a64.mean(axis=dim, keepdims=keep), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(x.amax(dim, keepdim=keep).numpy(),
                                  a.max(axis=dim, keepdims=keep))
    if dim is not None or nd:
        np.testing.assert_array_equal(x.argmax(dim, keepdim=keep).numpy(),
                                      np.argmax(a, axis=dim, keepdims=keep))
        np.testing.assert_array_equal(x.argmin(dim).numpy(), np.argmin(a, axis=dim))
    if dim is not None:
        values, indices = x.max(dim)
        np.testing.assert_array_equal(values.numpy(), a.max(axis=dim))
        np.testing.assert_array_equal(indices.numpy(), a.argmax(axis=dim))
        n = a.shape[dim]
        if n > 1:
            np.testing.assert_allclose(x.var(dim).numpy(), a64.var(axis=dim, ddof=1),
                                       rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(x.std(dim, correction=0).numpy(), a64.std(axis=dim),
                                       rtol=1e-4, atol=1e-5)
        lse = np.log(np.exp(a64 - a64.max(axis=dim, keepdims=True)).sum(axis=dim)) + \
            a64.max(axis=dim)
        np.testing.assert_allclose(x.logsumexp(dim).numpy(), lse, rtol=1e-5, atol=1e-6)


def test_integer_and_bool_reductions():
    x = t(np.array([[1, 2], [3, 4]], dtype=np.int32))
    assert x.sum().dtype == ndlite.int64 and x.sum().item() == 10
    mask = x > 2
    assert mask.sum().item() == 2 and mask.any().item() and not mask.all().item()
    assert mask.any(dim=1).tolist() == [False, True]


@given(data=st.data())
def test_matmul_matches_numpy_in_every_rank_combination(data):
    from ndlite.ops import OPS
    from ndlite.testing import strategy

    case = data.draw(strategy(OPS["matmul"].spec, "float64"))
    a, b = case.inputs
    out = t(a) @ t(b)
    expected = np.matmul(a, b)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


@given(a=float_arrays, data=st.data())
def test_movement_matches_numpy(a, data):
    x = t(a)
    order = data.draw(st.permutations(range(a.ndim)))
    np.testing.assert_array_equal(x.permute(*order).numpy(), a.transpose(order))
    np.testing.assert_array_equal(x.reshape(-1).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(x.flatten().numpy(), a.reshape(-1))
    np.testing.assert_array_equal(x.squeeze().numpy(), np.squeeze(a))
    np.testing.assert_array_equal(x.unsqueeze(0).numpy(), a[None])
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    target = data.draw(hnp.broadcastable_shapes(a.shape, max_dims=5, max_side=4))
    full = np.broadcast_shapes(a.shape, target)
    np.testing.assert_array_equal(x.expand(*full).numpy(), np.broadcast_to(a, full))
    if a.ndim:
        d = data.draw(st.integers(0, a.ndim - 1))
        np.testing.assert_array_equal(ndlite.cat([x, x], d).numpy(), np.concatenate([a, a], d))
        np.testing.assert_array_equal(ndlite.stack([x, x], d).numpy(), np.stack([a, a], d))
        parts = x.chunk(2, d)
        expected = np.array_split(a, len(parts), axis=d)
        for p, e in zip(parts, expected):
            np.testing.assert_array_equal(p.numpy(), e)
        lo, hi = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
        widths = [(0, 0)] * (a.ndim - 1) + [(lo, hi)]
        np.testing.assert_array_equal(ndlite.pad(x, (lo, hi), value=1.5).numpy(),
                                      np.pad(a, widths, constant_values=1.5))


def test_negative_pad_crops():
    x = ndlite.arange(10).reshape(2, 5)
    assert ndlite.pad(x, (-1, 2)).tolist() == [[1, 2, 3, 4, 0, 0], [6, 7, 8, 9, 0, 0]]


def _pytorch_getitem(a: np.ndarray, key: tuple) -> np.ndarray:
    """a[key] by PyTorch's rule, which differs from NumPy's in one place: integers are basic
    indices, taken first, so they never separate advanced ones (x[0, :, 0, [0]] on a
    (1, 2, 1, 1) array is (2, 1) in PyTorch, (1, 2) in NumPy)."""
    ints = tuple(k if isinstance(k, int) or k is None or k is Ellipsis else slice(None)
                 for k in key)
    rest = tuple(slice(None) if k is None else k for k in key if not isinstance(k, int))
    return a[ints][rest]


@given(data=st.data())
@pytest.mark.parametrize("advanced", [False, True])
def test_getitem_matches_numpy(advanced, data):
    shape = data.draw(shapes(min_dims=1))
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    key = _index_key(data.draw, shape, advanced)
    expected = _pytorch_getitem(a, key)
    out = t(a)[key]
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    tensor_key = tuple(t(k) if isinstance(k, np.ndarray) else k for k in key)
    np.testing.assert_array_equal(t(a)[tensor_key].numpy(), expected)


@given(data=st.data())
@pytest.mark.parametrize("advanced", [False, True])
def test_setitem_matches_numpy(advanced, data):
    shape = data.draw(shapes(min_dims=1))
    a = np.zeros(shape, dtype=np.float32)
    key = _index_key(data.draw, shape, advanced)
    written = _pytorch_getitem(np.arange(a.size).reshape(shape), key)
    assume(np.unique(written).size == written.size)
    value = np.arange(1, written.size + 1, dtype=np.float32).reshape(written.shape)
    x = t(a)
    x[key] = t(value)
    a.flat[written.ravel()] = value.ravel()
    np.testing.assert_array_equal(x.numpy(), a)
    x[key] = 7.0
    a.flat[written.ravel()] = 7.0
    np.testing.assert_array_equal(x.numpy(), a)


def test_views_write_through_to_their_base():
    x = ndlite.zeros(3, 4)
    x[1].fill_(1.0)
    x[:, 2:].add_(2.0)
    x.T[0] = 5.0
    x[::-1][0, ::-2] = 9.0
    expected = np.zeros((3, 4), np.float32)
    expected[1] = 1
    expected[:, 2:] += 2
    expected.T[0] = 5
    expected[::-1][0, ::-2] = 9
    np.testing.assert_array_equal(x.numpy(), expected)


def test_mask_and_integer_tensor_indexing():
    x = ndlite.arange(12).reshape(3, 4)
    assert x[ndlite.tensor([2, 0])].tolist() == [[8, 9, 10, 11], [0, 1, 2, 3]]
    assert x[[0, 2], [1, 3]].tolist() == [1, 11]
    assert x[:, None, 1].shape == (3, 1)
    assert x[..., -1].tolist() == [3, 7, 11]


@given(data=st.data())
def test_gather_and_scatter_add_match_numpy(data):
    from ndlite.ops import OPS
    from ndlite.testing import strategy

    case = data.draw(strategy(OPS["gather"].spec, "float32"))
    (a, index), dim = case.inputs, case.params["dim"]
    out = ndlite.gather(t(a), dim, t(index))  # torch.gather: the result has index's shape
    cut = a[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index.shape))]
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(cut, index, dim))
    case = data.draw(strategy(OPS["scatter_add"].spec, "float64"))
    (index, values), p = case.inputs, case.params
    out = ndlite.scatter_add(t(index), t(values), p["dim"], p["size"])
    shape = list(values.shape)
    shape[p["dim"]] = p["size"]
    expected = np.zeros(shape)
    full_index = np.broadcast_to(index, values.shape)
    grid = list(np.indices(values.shape))
    grid[p["dim"]] = full_index
    np.add.at(expected, tuple(grid), values)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("a_dtype,b_dtype,result", [
    (ndlite.int64, ndlite.float32, ndlite.float32),
    (ndlite.float32, ndlite.float64, ndlite.float64),
    (ndlite.int32, ndlite.int64, ndlite.int64),
    (ndlite.bool_, ndlite.int32, ndlite.int32),
    (ndlite.bool_, ndlite.float32, ndlite.float32),
])
def test_dtype_promotion(a_dtype, b_dtype, result):
    a, b = ndlite.ones(2, dtype=a_dtype), ndlite.ones(2, dtype=b_dtype)
    assert (a + b).dtype == result and (b * a).dtype == result


def test_python_scalars_are_weak():
    f = ndlite.ones(2)
    i = ndlite.ones(2, dtype=ndlite.int32)
    assert (f + 1).dtype == ndlite.float32 and (f * 2.5).dtype == ndlite.float32
    assert (i + 1).dtype == ndlite.int32 and (i + 1.5).dtype == ndlite.float32
    assert (i / 2).dtype == ndlite.float32 and (i / i).tolist() == [1.0, 1.0]
    assert i.exp().dtype == ndlite.float32
    assert (2 - f).tolist() == [1.0, 1.0] and (2 / (f * 4)).tolist() == [0.5, 0.5]
    assert (2 ** (f * 3)).tolist() == [8.0, 8.0] and ((f * 3) ** 2).tolist() == [9.0, 9.0]
    b = ndlite.tensor([True, False])
    assert (b + True).dtype == ndlite.bool_ and (b * 3).dtype == ndlite.int64
    assert (b & ndlite.tensor([True, True])).tolist() == [True, False]
    assert (~b).tolist() == [False, True] and (b | ~b).all().item()


def test_where_and_clamp():
    x = ndlite.tensor([-2.0, 0.5, 3.0])
    assert ndlite.where(x > 0, x, 0.0).tolist() == [0.0, 0.5, 3.0]
    assert ndlite.where(x > 0, 1.0, -1.0).tolist() == [-1.0, 1.0, 1.0]
    assert x.clamp(-1, 1).tolist() == [-1.0, 0.5, 1.0]
    assert x.clamp(min=0).tolist() == [0.0, 0.5, 3.0]
    lo = ndlite.tensor([0.0, 1.0, 0.0])
    assert x.clamp(min=lo).tolist() == [0.0, 1.0, 3.0]


def test_split_sections_and_narrow():
    x = ndlite.arange(10)
    assert [p.tolist() for p in x.split([3, 7])] == [list(range(3)), list(range(3, 10))]
    assert [p.numel() for p in x.split(4)] == [4, 4, 2]
    assert x.narrow(0, 2, 3).tolist() == [2, 3, 4]
