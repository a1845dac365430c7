"""In-place writes through views of non-leaf tensors (issue 12, defect 1): the base and every
view see the write in their gradients (PyTorch's CopySlices), on every backend; and grad()
composes (defect 2). Expected values are PyTorch's."""

import pytest

import ndlite


def _x(backend, values=(1.0, 2.0, 3.0)):
    return ndlite.tensor(list(values), requires_grad=True, backend=backend)


def test_mul_through_slice_of_non_leaf(backend):
    x = _x(backend)
    y = x * 1
    y[0:2].mul_(2.0)
    (y * y).sum().backward()
    assert x.grad.tolist() == [8.0, 16.0, 6.0]


def test_setitem_through_view_of_view(backend):
    x = _x(backend)
    y = x.clone()
    y[:2][0] = 5.0
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


def test_view_taken_before_a_write_to_its_base(backend):
    x = _x(backend)
    y = x.clone()
    v = y[0:2]
    y.mul_(2.0)
    v.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 0.0]


def test_write_through_reshape_and_transpose_views(backend):
    x = ndlite.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True, backend=backend)
    y = x * 1
    y.reshape(4)[1:3].mul_(10.0)
    y.t()[1].relu_()  # y's second column, [-20, 4], becomes [0, 4]
    (y * y).sum().backward()
    assert x.grad.tolist() == [[2.0, 0.0], [600.0, 8.0]]


def test_relu_on_a_view_of_a_view(backend):
    x = ndlite.tensor([[1.0, -2.0], [-3.0, 4.0]], requires_grad=True, backend=backend)
    y = x * 2
    y[1][:].relu_()
    y.sum().backward()
    assert x.grad.tolist() == [[2.0, 2.0], [0.0, 2.0]]


def test_retain_grad_follows_the_in_place_value(backend):
    x = _x(backend)
    y = x * 1
    y.retain_grad()
    y.mul_(3.0)
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 12.0, 18.0]
    assert x.grad.tolist() == [18.0, 36.0, 54.0]


def test_write_of_a_grad_value_into_a_view_of_a_plain_tensor(backend):
    x = _x(backend)
    y = ndlite.zeros(3, backend=backend)
    v = y[1:]
    v.copy_(x[:2] * 3)
    assert y.requires_grad and v.requires_grad
    (y * ndlite.tensor([1.0, 2.0, 4.0], backend=backend)).sum().backward()
    assert x.grad.tolist() == [6.0, 12.0, 0.0]


def test_view_of_a_leaf_cannot_be_written_in_grad_mode(backend):
    x = _x(backend)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        x[0:2].mul_(2.0)
    with ndlite.no_grad():
        x[0:2].mul_(2.0)
    assert x.detach().tolist() == [2.0, 4.0, 3.0]


def test_view_of_a_non_viewable_tensor_raises():
    x = ndlite.arange(6.0).reshape(2, 3).t()
    with pytest.raises(RuntimeError, match="reshape"):
        x.view(6)
    assert x.reshape(6).tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    assert x.view(3, 2).shape == (3, 2)


def test_nested_grad_is_the_second_derivative(backend):
    d2 = ndlite.grad(ndlite.grad(lambda t: t ** 3))(ndlite.tensor(2.0, backend=backend))
    assert d2.item() == pytest.approx(12.0)


def test_a_no_grad_view_cannot_be_written_in_grad_mode(backend):
    y = _x(backend) * 1
    with ndlite.no_grad():
        v = y[0:2]
    with pytest.raises(RuntimeError, match="no_grad mode"):
        v.mul_(2.0)
    with ndlite.no_grad():
        v.mul_(2.0)  # untracked, as in PyTorch
    assert y.detach().tolist() == [2.0, 4.0, 3.0]
