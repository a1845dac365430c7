"""Finite gradients where the true gradient is finite (issue 12, defect 3), losses at
infinite per-sample losses (defect 5), and no false "modified by an in-place operation"
alarms from tensors an op's backward never reads. Expected values are PyTorch's."""

import math

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F


def test_binary_cross_entropy_at_certain_probabilities(backend):
    z = ndlite.tensor([20.0, -120.0, 0.0], requires_grad=True, backend=backend)
    loss = F.binary_cross_entropy(z.sigmoid(), ndlite.tensor([1.0, 0.0, 1.0], backend=backend))
    loss.backward()
    assert z.grad.tolist()[:2] == [0.0, 0.0]
    assert z.grad.tolist()[2] == pytest.approx(-0.5 / 3)


@pytest.mark.parametrize("bad", [[0.5, 1.5], [-0.1, 0.5]])
def test_binary_cross_entropy_checks_targets(backend, bad):
    p = ndlite.tensor([0.5, 0.5], backend=backend)
    with pytest.raises(ValueError, match="target should be between 0 and 1"):
        F.binary_cross_entropy(p, ndlite.tensor(bad, backend=backend))


def test_binary_cross_entropy_refuses_nan_input(backend):
    with pytest.raises(ValueError, match="input should be between 0 and 1"):
        F.binary_cross_entropy(ndlite.tensor([float("nan")], backend=backend),
                               ndlite.tensor([1.0], backend=backend))


@pytest.mark.parametrize("shape", [(3, 4), (3, 4, 2)])
def test_every_target_ignored_gives_nan_loss_and_zero_gradient(backend, shape):
    x = ndlite.randn(*shape, backend=backend).requires_grad_()
    target = ndlite.full((shape[0],) + shape[2:], -100, dtype=ndlite.int64, backend=backend)
    loss = F.cross_entropy(x, target)
    loss.backward()
    assert math.isnan(loss.item())
    assert x.grad.abs().sum().item() == 0.0


def test_nll_loss_of_an_infinite_sample_is_inf(backend):
    logp = ndlite.tensor([[0.0, float("-inf")], [0.0, 0.0]], backend=backend)
    target = ndlite.tensor([1, 0], backend=backend)
    assert F.nll_loss(logp, target).item() == math.inf
    assert F.nll_loss(logp, target, reduction="sum").item() == math.inf
    ignored = ndlite.tensor([-100, 0], backend=backend)
    logp2 = ndlite.tensor([[float("-inf"), 0.0], [-1.0, 0.0]], backend=backend)
    assert F.nll_loss(logp2, ignored, reduction="sum").item() == 1.0


def test_std_of_equal_values_has_zero_gradient(backend):
    x = ndlite.tensor([1.0, 1.0, 1.0], requires_grad=True, backend=backend)
    x.std().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_norms_of_zero_vectors_have_pytorchs_finite_gradients(backend):
    # the chain rule through sqrt gave 0 * inf = NaN here, and so did normalize and
    # cosine_similarity of a zero row (a padding embedding's); PyTorch's values
    x = ndlite.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True, backend=backend)
    ndlite.linalg.vector_norm(x, dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 0.0], [0.6, 0.8]], rtol=1e-6)
    for ord in (2, 3):
        z = ndlite.zeros(3, requires_grad=True, backend=backend)
        ndlite.linalg.vector_norm(z, ord=ord).backward()
        assert z.grad.tolist() == [0.0, 0.0, 0.0]
    z = ndlite.zeros(2, requires_grad=True, backend=backend)
    F.normalize(z, dim=0).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [1e12, 1e12], rtol=1e-6)
    a = ndlite.zeros(1, 3, requires_grad=True, backend=backend)
    b = ndlite.ones(1, 3, backend=backend)
    F.cosine_similarity(a, b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.full((1, 3), 1e8 / math.sqrt(3)), rtol=1e-5)
    nan = ndlite.tensor([float("nan"), 1.0], backend=backend)
    assert math.isnan(ndlite.linalg.vector_norm(nan).item())


def test_products_with_zeros_have_pytorchs_gradients(backend):
    # cumprod's backward divided by x: 0 / 0 = NaN at every zero, and prod is a cumprod
    x = ndlite.tensor([[0.0, 2.0, 3.0, 0.0], [1.0, 0.0, 2.0, 4.0], [1.0, 2.0, 3.0, 4.0]],
                      requires_grad=True, backend=backend)
    x.prod(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0, 0, 0], [0, 8, 0, 0], [24, 12, 8, 6]])
    y = ndlite.tensor([2.0, 0.0, 3.0, 5.0], requires_grad=True, backend=backend)
    y.cumprod(0).backward(ndlite.tensor([1.0, 10.0, 100.0, 1000.0], backend=backend))
    # d/dy0 = 1 (the zero stops the rest); d/dy1 = 2*10 + 2*3*100 + 2*3*5*1000; then 0
    np.testing.assert_allclose(y.grad.numpy(), [1.0, 30620.0, 0.0, 0.0])


def test_atan2_at_the_origin_and_clamp_to_tensor_bounds_are_pytorchs(backend):
    y = ndlite.tensor([0.0, 1.0], requires_grad=True, backend=backend)
    x = ndlite.tensor([0.0, 1.0], requires_grad=True, backend=backend)
    ndlite.atan2(y, x).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 0.5])
    np.testing.assert_allclose(x.grad.numpy(), [0.0, -0.5])
    # a tie goes to x (maximum split it in halves), and min > max gives max
    x = ndlite.tensor([1.0, 2.0, 5.0], requires_grad=True, backend=backend)
    lo = ndlite.tensor([2.0, 2.0, 4.0], requires_grad=True, backend=backend)
    hi = ndlite.tensor([3.0, 3.0, 3.5], requires_grad=True, backend=backend)
    out = x.clamp(lo, hi)
    assert out.tolist() == [2.0, 2.0, 3.5]
    out.backward(ndlite.tensor([1.0, 2.0, 3.0], backend=backend))
    assert (x.grad.tolist(), lo.grad.tolist(), hi.grad.tolist()) == \
        ([0.0, 2.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 3.0])


def test_a_query_that_attends_nowhere_gives_zeros_not_nan_everywhere(backend):
    # PyTorch's safe softmax: a row whose mask is all False (a padded query) outputs 0 and
    # passes no gradient; its 0 / 0 = NaN had spread into every gradient of q, k and v
    q = ndlite.tensor(np.arange(12.0).reshape(1, 3, 4) / 10, requires_grad=True,
                      backend=backend)
    mask = ndlite.tensor([[True, False, False], [True, True, False], [False, False, False]],
                         backend=backend)
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert out.detach().numpy()[0, 2].tolist() == [0.0, 0.0, 0.0, 0.0]
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all()
    np.testing.assert_allclose(out.detach().numpy()[0, 0], q.detach().numpy()[0, 0], rtol=1e-6)


def test_embedding_padding_row_is_returned_and_gets_no_gradient(backend):
    w = ndlite.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True, backend=backend)
    out = F.embedding(ndlite.tensor([1, 0, 1], backend=backend), w, padding_idx=1)
    assert out.tolist() == [[2.0, 3.0], [0.0, 1.0], [2.0, 3.0]]  # PyTorch: the row as it is
    out.sum().backward()
    assert w.grad.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]


def test_regression_losses_of_infinite_inputs_have_finite_gradients(backend):
    x = ndlite.tensor([float("inf"), -float("inf"), 0.5], requires_grad=True, backend=backend)
    for loss in (F.huber_loss, F.smooth_l1_loss):
        x.grad = None
        loss(x, ndlite.zeros(3, backend=backend), reduction="sum").backward()
        assert x.grad.tolist() == [1.0, -1.0, 0.5]


def test_pow_at_zero_with_a_tensor_exponent(backend):
    x = ndlite.tensor([0.0, 2.0, 0.0], requires_grad=True, backend=backend)
    y = ndlite.tensor([2.0, 0.0, 0.0], requires_grad=True, backend=backend)
    (x ** y).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    assert y.grad.tolist()[0] == 0.0 and y.grad.tolist()[2] == 0.0
    assert y.grad.tolist()[1] == pytest.approx(math.log(2.0))


def test_number_to_a_tensor_power_backward(backend):
    x = ndlite.tensor([0.0, 1.0], requires_grad=True, backend=backend)
    (2.0 ** x).sum().backward()
    assert x.grad.tolist() == pytest.approx([math.log(2.0), 2 * math.log(2.0)])


def test_no_false_in_place_alarm_for_unread_saved_tensors(backend):
    x = ndlite.tensor([1.0, 2.0], requires_grad=True, backend=backend)
    y = x ** 2
    y.add_(1.0)  # pow's backward reads x, not its output
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
    x.grad = None
    h = x * 1
    g = ndlite.gather(h, 0, ndlite.tensor([1, 0], backend=backend))
    h.add_(1.0)  # gather's backward reads the index only
    g.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    x.grad = None
    h = x * 1
    w = ndlite.where(ndlite.tensor([True, False], backend=backend), h, 0.0)
    h.mul_(5.0)  # where's backward reads the condition only
    w.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0]


def test_mul_keeps_only_what_the_needed_gradients_read(backend):
    x = ndlite.tensor([1.0, 2.0], requires_grad=True, backend=backend)
    y = -x
    z = y * 0.5  # x * c reads no x
    y.mul_(3.0)
    z.sum().backward()
    assert x.grad.tolist() == [-0.5, -0.5]
    x.grad = None
    h = x.tanh() + x
    c = h.detach() * 1.0
    w = c * h  # h's gradient reads c only: c needs none
    h.mul_(0.0)
    w.sum().backward()
    expected = c.numpy() * (2 - x.detach().tanh().numpy() ** 2)
    assert x.grad.tolist() == pytest.approx(expected.tolist())


def test_a_reshape_of_an_empty_tensor_is_a_view(backend):
    y = (ndlite.zeros(0, 0, backend=backend).requires_grad_() * 1.0).tanh()
    y.reshape(-1).mul_(2.0)  # tanh saved its output, which this changed (as in PyTorch)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


@pytest.mark.parametrize(("where", "options", "values", "indices"), [
    ([(0, 0), (1, 0)], {"kernel_size": 2}, [math.nan], [2]),  # non-overlapping: the last NaN
    ([(1, 1)], {"kernel_size": 2, "stride": 1}, [math.nan] * 4, [4] * 4),  # overlapping
    ([(0, 0)], {"kernel_size": 2, "padding": 1}, None, [0, 2, 3, 8, 10, 11, 12, 14, 15]),
])
def test_max_pool_propagates_nan(backend, where, options, values, indices):
    side = 2 if options.get("stride", 2) == 2 and "padding" not in options else \
        (3 if "padding" not in options else 4)
    x = np.arange(side * side, dtype=np.float32).reshape(1, 1, side, side)
    for i, j in where:
        x[0, 0, i, j] = np.nan
    t = ndlite.tensor(x, requires_grad=True, backend=backend)
    out, index = F.max_pool2d(t, return_indices=True, **options)
    got = out.detach().numpy().ravel()
    assert index.numpy().ravel().tolist() == indices
    assert math.isnan(got[0])
    if values is not None:
        assert all(math.isnan(v) for v in got)
    out.sum().backward()
    assert t.grad.numpy().ravel()[indices[0]] >= 1.0
