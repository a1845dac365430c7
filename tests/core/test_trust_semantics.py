"""PyTorch's semantics where the README promises them (issue 12): checkpoints keep 0-d
tensors (defect 6), gather's signature and shapes (7), even tie gradients of amax/amin/max()
(12), 0-d tensors in reductions and gather, and malformed checkpoint metadata."""

import json

import numpy as np
import pytest

import ndlite
from ndlite.errors import ShapeError


def test_checkpoint_keeps_a_0d_tensor(tmp_path):
    path = tmp_path / "scalar.npz"
    ndlite.save({"scale": ndlite.tensor(2.5), "a": np.array(1.0)}, path)
    back = ndlite.load(path)
    assert back["scale"].shape == () and back["scale"].item() == 2.5
    assert back["a"].shape == ()


@pytest.mark.parametrize("tree", [
    {"tensor": 7}, {"dict": [[1]]}, {"list": 3}, [1, 2], "x", {"dict": [[{"list": []}, 1]]},
])
def test_malformed_checkpoint_metadata_is_a_value_error(tmp_path, tree):
    path = tmp_path / "bad.npz"
    meta = json.dumps({"format": "ndlite-checkpoint", "version": 1, "tree": tree})
    np.savez(path, __ndlite__=np.frombuffer(meta.encode(), dtype=np.uint8))
    with pytest.raises(ValueError, match="not a readable ndlite checkpoint"):
        ndlite.load(path)


def test_deeply_nested_checkpoint_metadata_is_a_value_error(tmp_path):
    path = tmp_path / "deep.npz"
    meta = '{"format": "ndlite-checkpoint", "version": 1, "tree": ' + \
        '{"list": [' * 5000 + ']}' * 5000 + '}'
    np.savez(path, __ndlite__=np.frombuffer(meta.encode(), dtype=np.uint8))
    with pytest.raises(ValueError):
        ndlite.load(path)


def test_gather_takes_torch_order_and_index_shape(backend):
    x = ndlite.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True, backend=backend)
    index = ndlite.tensor([[2], [0]], backend=backend)
    out = ndlite.gather(x, 1, index)
    assert out.tolist() == [[3.0], [4.0]]
    row = ndlite.gather(x, 0, ndlite.tensor([[1, 0]], backend=backend))
    assert row.shape == (1, 2) and row.tolist() == [[4.0, 2.0]]
    row.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    with pytest.raises(ShapeError):
        ndlite.gather(x, 1, ndlite.tensor([[0], [0], [0]], backend=backend))


def test_gather_and_argmax_of_0d_tensors(backend):
    s = ndlite.tensor(1.5, backend=backend)
    assert ndlite.gather(s, 0, ndlite.tensor(0, backend=backend)).item() == 1.5
    assert s.argmax(0).item() == 0 and s.argmin(-1).item() == 0
    values, indices = s.max(0)
    assert values.item() == 1.5 and indices.item() == 0
    with pytest.raises(ShapeError):
        s.sum(dim=5)


def test_tie_gradients_are_shared_evenly(backend):
    x = ndlite.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True, backend=backend)
    x.amax(1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]
    x.grad = None
    x.max().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]
    x.grad = None
    x.amin().backward()
    assert x.grad.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    x.grad = None
    x.max(1).values.sum().backward()  # max(dim) follows its index, as in PyTorch
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


def test_integer_power_with_negative_tensor_exponents(backend):
    a = ndlite.tensor([1, -1, 2, -1, 3], backend=backend)
    e = ndlite.tensor([-1, -1, -1, -2, 2], backend=backend)
    assert (a ** e).tolist() == [1, -1, 0, 1, 9]


def test_bool_to_a_bool_power_is_refused(backend):
    t = ndlite.tensor([True, False], backend=backend)
    with pytest.raises(ndlite.DTypeError):
        t ** t


def test_a_0d_tensor_does_not_widen_a_dimensioned_one(backend):
    def zero_d(value, dtype):
        return ndlite.tensor(value, dtype=dtype, backend=backend)

    assert (ndlite.ones(3, backend=backend) + zero_d(1.5, ndlite.float64)).dtype == ndlite.float32
    ints = ndlite.tensor([1, 2], dtype=ndlite.int32, backend=backend)
    assert (ints + zero_d(3, ndlite.int64)).dtype == ndlite.int32
    assert (ints + zero_d(1.5, ndlite.float64)).dtype == ndlite.float64
    assert (zero_d(1.0, ndlite.float32) + zero_d(1.0, ndlite.float64)).dtype == ndlite.float64


def test_erf_and_gelu_are_float64_accurate(backend):
    import math

    xs = np.linspace(-6.0, 6.0, 241)
    t = ndlite.tensor(xs, dtype=ndlite.float64, backend=backend)
    got = ndlite.ops.activation.erf(t).numpy()
    expected = np.array([math.erf(v) for v in xs])
    np.testing.assert_allclose(got, expected, rtol=4e-15, atol=1e-300)
    assert ndlite.nn.functional.gelu(ndlite.tensor([-1e4], backend=backend)).item() == 0.0


def test_erf_fallback_is_float64_accurate():
    import math

    from ndlite.device import special

    b = ndlite.get_backend("numpy")
    xs = np.concatenate([np.linspace(-30.0, 30.0, 6001), [np.inf, -np.inf]])
    got = b.to_numpy(special.erf(b, b.from_numpy(xs)))
    np.testing.assert_allclose(got, [math.erf(v) for v in xs], rtol=4e-15, atol=1e-300)
    assert np.isnan(b.to_numpy(special.erf(b, b.from_numpy(np.array([np.nan]))))).all()


def test_empty_softmax_and_convolutions(backend):
    import ndlite.nn.functional as F

    assert F.softmax(ndlite.zeros(2, 0, backend=backend), 1).shape == (2, 0)
    assert F.log_softmax(ndlite.zeros(2, 0, backend=backend), 1).shape == (2, 0)
    x = ndlite.zeros(0, 1, 4, 4, backend=backend)
    assert F.conv2d(x, ndlite.zeros(2, 1, 3, 3, backend=backend)).shape == (0, 2, 2, 2)
    x = ndlite.zeros(1, 0, 4, 4, backend=backend)
    bias = ndlite.tensor([1.0, 2.0], requires_grad=True, backend=backend)
    out = F.conv2d(x, ndlite.zeros(2, 0, 3, 3, backend=backend), bias)
    assert out.shape == (1, 2, 2, 2) and out[0, :, 0, 0].tolist() == [1.0, 2.0]
    out.sum().backward()
    assert bias.grad.tolist() == [4.0, 4.0]


def test_batch_norm_cumulative_average_and_eval_needs_statistics():
    bn = ndlite.nn.BatchNorm1d(1, momentum=None)
    for value in (1.0, 3.0):
        bn(ndlite.tensor([[value - 1], [value + 1]]))
    assert bn.running_mean.tolist() == [2.0]  # the mean of both batches' means
    assert bn.num_batches_tracked.item() == 2
    with pytest.raises(ValueError, match="evaluation mode"):
        ndlite.nn.functional.batch_norm(ndlite.ones(2, 1), None, None, training=False)


@pytest.mark.parametrize(("key", "shape"), [
    ((0, slice(None), [1, 2]), (3, 2)),
    ((slice(None), 1, [0, 3]), (2, 2)),
    (([0, 1], 0, [1, 2]), (2,)),
    ((1, Ellipsis, [0, 1]), (3, 2)),
])
def test_integers_select_before_advanced_indices(backend, key, shape):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = ndlite.tensor(a, backend=backend)
    assert x[key].shape == shape  # PyTorch's shapes (NumPy puts the int's dim first)
    y = ndlite.tensor(a, backend=backend)
    y[key] = -1.0
    assert (y[key] == -1.0).all().item()
    assert int((y == -1.0).sum().item()) == int(np.prod(shape))


def test_mixed_index_values():
    a = np.arange(24.0).reshape(2, 3, 4)
    assert ndlite.tensor(a)[0, :, [1, 2]].tolist() == a[0][:, [1, 2]].tolist()


def test_float32_sums_along_any_axis_are_accurate(backend):
    x = ndlite.full((2048, 2048), 0.1, backend=backend)
    exact = float(np.float32(0.1)) * 2048
    for sums in (x.sum(0), x.t().sum(1), x.sum(1)):
        error = np.abs(sums.numpy().astype(np.float64) - exact).max() / exact
        assert error < 2e-7
