"""Bad input raises a typed error that names the op and the shapes, before anything changes."""

import numpy as np
import pytest

import ndlite
from ndlite.errors import DeviceMismatchError, DTypeError, ShapeError


def test_matmul_names_both_shapes():
    with pytest.raises(ShapeError, match=r"matmul: shapes \(3, 4\) and \(5, 6\) are not aligned: "
                                         r"4 != 5"):
        ndlite.ones(3, 4) @ ndlite.ones(5, 6)
    with pytest.raises(ShapeError, match="matmul.*broadcast"):
        ndlite.ones(2, 3, 4) @ ndlite.ones(5, 4, 2)
    with pytest.raises(ShapeError, match="at least 1 dim"):
        ndlite.ones(()) @ ndlite.ones(3)


def test_broadcasting_mismatch_names_op_and_shapes():
    with pytest.raises(ShapeError, match=r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        ndlite.ones(2, 3) + ndlite.ones(4)
    with pytest.raises(ShapeError, match="where"):
        ndlite.where(ndlite.ones(2) > 0, ndlite.ones(3), 0.0)


@pytest.mark.parametrize("call,pattern", [
    (lambda x: x.sum(dim=3), r"sum: dim 3 is out of range"),
    (lambda x: x.reshape(4, 4), r"reshape: cannot reshape a tensor of shape \(2, 3\)"),
    (lambda x: x.reshape(-1, -1), r"only one dimension can be -1"),
    (lambda x: x.permute(0, 0), r"permute: dims"),
    (lambda x: x.expand(4, 3), r"expand: the size 2"),
    (lambda x: ndlite.cat([x, ndlite.ones(3, 3)], dim=1), r"cat: shapes \(2, 3\) and \(3, 3\)"),
    (lambda x: ndlite.stack([x, x.T]), r"stack"),
    (lambda x: x.split([1, 1], dim=1), r"split: sizes \[1, 1\] do not add up to 3"),
    (lambda x: ndlite.pad(x, (1,)), r"pad"),
    (lambda x: x.unsqueeze(5), r"unsqueeze: dim 5"),
    (lambda x: x.flatten(1, 0), r"flatten"),
    (lambda x: x.item(), r"item: only one-element tensors"),
    (lambda x: x.amax(dim=(0, 0)), r"repeats"),
    (lambda x: ndlite.ones(0).amax(), r"amax: cannot reduce over an empty"),
])
def test_shape_errors(call, pattern):
    with pytest.raises(ShapeError, match=pattern):
        call(ndlite.ones(2, 3))


def test_negative_sizes():
    for make in (lambda: ndlite.zeros(2, -1), lambda: ndlite.ones((-3,)),
                 lambda: ndlite.full((1, -2), 0.0), lambda: ndlite.randn(-1)):
        with pytest.raises(ShapeError, match="negative dimension"):
            make()


def test_dtype_errors():
    b = ndlite.tensor([True, False])
    with pytest.raises(DTypeError, match="sub is not supported on bool"):
        b - b
    with pytest.raises(DTypeError, match="neg is not supported on bool"):
        _ = -b
    with pytest.raises(DTypeError, match="mean: needs a floating tensor"):
        ndlite.tensor([1, 2]).mean()
    with pytest.raises(DTypeError, match="not supported"):
        ndlite.tensor(np.zeros(2, np.uint8))
    with pytest.raises(DTypeError, match="complex64"):
        ndlite.tensor(np.zeros(2, np.complex64))
    with pytest.raises(DTypeError, match="&: needs bool"):
        ndlite.ones(2) & ndlite.ones(2)
    with pytest.raises(DTypeError, match="~: needs bool"):
        ~ndlite.tensor([1, 2])
    # the named functions read any dtype as PyTorch's do: nonzero is true
    assert ndlite.logical_and(ndlite.tensor([0, 1, 2]), ndlite.tensor([1.0, 0.0, 3.0])).tolist() \
        == [False, False, True]
    assert ndlite.tensor([0.0, 2.0]).logical_not().tolist() == [True, False]
    assert ndlite.tensor([1, 2]).mean(dtype=ndlite.float64).item() == 1.5
    with pytest.raises(DTypeError, match="negative integer powers"):
        ndlite.tensor([2]) ** -1
    with pytest.raises(DTypeError, match="where: condition must be a bool"):
        ndlite.where(ndlite.ones(2), 1.0, 0.0)
    assert ndlite.tensor(np.zeros(2, np.uint8), dtype=ndlite.float32).dtype == ndlite.float32


def test_index_errors():
    x = ndlite.ones(2, 3)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for dim 1 with size 3"):
        x[:, 5]
    with pytest.raises(IndexError, match="index 3 is out of bounds"):
        x[:, [0, 3]]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="mask of shape"):
        x[ndlite.tensor([True, False, True])]
    with pytest.raises(ShapeError, match=r"setitem: shapes \(4,\) and \(3,\)"):
        x[0] = ndlite.ones(4)


def test_two_backends_in_one_op_is_a_device_mismatch(second_numpy):
    other = second_numpy
    a = ndlite.ones(2)
    b = ndlite.ones(2, backend=other)
    with pytest.raises(DeviceMismatchError, match="numpy.*numpy2"):
        a + b
    with pytest.raises(DeviceMismatchError):
        a @ b
    assert (a + b.to("numpy")).tolist() == [2.0, 2.0]


def test_a_failed_in_place_op_changes_nothing():
    x = ndlite.tensor([1.0, 2.0, 3.0])
    version = x._version
    with pytest.raises(ShapeError):
        x.add_(ndlite.ones(2, 3))  # the result would be (2, 3): it cannot be written into x
    with pytest.raises(DTypeError):
        ndlite.tensor([1, 2]).add_(0.5)
    with pytest.raises(IndexError):
        x[[0, 7]] = 1.0
    assert x.tolist() == [1.0, 2.0, 3.0] and x._version == version


def test_a_failed_backward_keeps_gradients():
    w = ndlite.tensor([1.0, 2.0], requires_grad=True)
    (w * 2).sum().backward()
    y = w * 3
    with pytest.raises(ShapeError):
        y.backward(ndlite.ones(5))
    assert w.grad.tolist() == [2.0, 2.0]
