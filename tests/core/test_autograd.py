"""Autograd semantics, following PyTorch where users expect it: accumulation, grad modes,
detach, retain_graph, create_graph, version checks, retain_grad, functional gradients."""

import numpy as np
import pytest

import ndlite
from ndlite.errors import DTypeError, ShapeError


def leaf(values, dtype=ndlite.float64):
    return ndlite.tensor(values, dtype=dtype, requires_grad=True)


def test_grad_accumulates_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3 + 2, 3 + 4])


def test_tensor_used_twice_sums_both_paths():
    x = leaf([3.0])
    y = x * x + x
    y.backward()
    assert x.grad.tolist() == [7.0]


def test_broadcast_input_gets_reduced_gradient():
    b = leaf([1.0, 2.0, 3.0])
    x = leaf(np.ones((2, 3)))
    (x * b).sum().backward()
    assert b.grad.shape == (3,) and b.grad.tolist() == [2.0, 2.0, 2.0]


def test_no_grad_records_nothing_and_works_as_decorator():
    x = leaf([1.0])
    with ndlite.no_grad():
        y = x * 2
        with ndlite.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad

    @ndlite.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    assert ndlite.is_grad_enabled()
    with ndlite.set_grad_enabled(False):
        assert not ndlite.is_grad_enabled()
    assert ndlite.is_grad_enabled()


def test_detach_shares_values_and_leaves_the_graph():
    x = leaf([1.0, 2.0])
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf
    assert d.tolist() == [2.0, 4.0]
    d.mul_(10)  # shares memory, like torch
    assert y.tolist() == [20.0, 40.0]


def test_requires_grad_rules():
    with pytest.raises(DTypeError, match="floating"):
        ndlite.tensor([1, 2], requires_grad=True)
    x = leaf([1.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)
    z = ndlite.ones(2)
    assert z.requires_grad_() is z and z.requires_grad and z.is_leaf


def test_second_backward_through_freed_graph_raises():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time.*retain_graph"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_a_graph_that_saved_nothing_can_be_walked_twice():
    x = leaf([1.0])
    y = (x + 1).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0]


def test_create_graph_gives_second_derivatives():
    x = leaf([1.0, 2.0])
    (g,) = ndlite.autograd.grad((x ** 3).sum(), [x], create_graph=True)
    assert g.requires_grad
    (h,) = ndlite.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(h.numpy(), [6.0, 12.0])


def test_hessian_vector_product_matches_finite_differences():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4))
    x0, v = rng.standard_normal(4), rng.standard_normal(4)
    W = ndlite.tensor(w)

    def grad_at(values):
        x = leaf(values)
        (g,) = ndlite.autograd.grad((W @ x).tanh().sum(), [x], create_graph=True)
        return x, g

    x, g = grad_at(x0)
    (hv,) = ndlite.autograd.grad((g * ndlite.tensor(v)).sum(), [x])
    eps = 1e-6
    numeric = (grad_at(x0 + eps * v)[1].detach().numpy() -
               grad_at(x0 - eps * v)[1].detach().numpy()) / (2 * eps)
    np.testing.assert_allclose(hv.numpy(), numeric, rtol=1e-5, atol=1e-8)


def test_modifying_a_saved_input_in_place_raises_at_backward():
    x = leaf([1.0, 2.0])
    z = x * 1
    y = (z * z).sum()  # mul saves z
    z.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_modifying_a_saved_output_through_a_view_raises_at_backward():
    x = leaf([1.0, 2.0, 3.0])
    y = x.exp()  # exp saves its output
    view = y[0:2]
    view.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_in_place_on_a_leaf_that_requires_grad_is_an_error_unless_no_grad():
    w = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf"):
        w.add_(1)
    assert w.tolist() == [1.0, 2.0]
    with ndlite.no_grad():
        w.sub_(ndlite.tensor([0.5, 0.5], dtype=ndlite.float64))
    assert w.tolist() == [0.5, 1.5] and w._version == 1


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    z = x * 3
    (y * y + z).sum().backward()
    assert y.grad.tolist() == [4.0, 8.0]
    assert z.grad is None


def test_backward_needs_a_gradient_for_non_scalars():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="scalar outputs"):
        y.backward()
    with pytest.raises(ShapeError, match="gradient has shape"):
        y.backward(ndlite.ones(3, dtype=ndlite.float64))
    y.backward(ndlite.tensor([1.0, 10.0], dtype=ndlite.float64))
    assert x.grad.tolist() == [2.0, 20.0]


def test_backward_without_a_graph_explains():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ndlite.ones(()).backward()


def test_autograd_grad_leaves_dot_grad_alone_and_reports_unused_inputs():
    x, u = leaf([1.0]), leaf([1.0])
    (g,) = ndlite.autograd.grad((x * 5).sum(), [x])
    assert g.tolist() == [5.0] and x.grad is None
    with pytest.raises(RuntimeError, match="not used"):
        ndlite.autograd.grad((x * 5).sum(), [x, u])
    assert ndlite.autograd.grad((x * 5).sum(), [x, u], allow_unused=True)[1] is None


def test_functional_grad_and_value_and_grad():
    def f(a, b, scale):
        return (a * b).sum() * scale

    a = ndlite.tensor([1.0, 2.0])
    b = ndlite.tensor([3.0, 4.0])
    value, (ga, gb) = ndlite.value_and_grad(f, argnums=(0, 1))(a, b, 2.0)
    assert value.item() == 22.0 and not value.requires_grad
    assert ga.tolist() == [6.0, 8.0] and gb.tolist() == [2.0, 4.0]
    assert a.grad is None and not a.requires_grad  # the caller's tensors are untouched
    assert ndlite.grad(lambda t: (t * t).sum())(a).tolist() == [2.0, 4.0]
    unused = ndlite.grad(lambda t, s: (t * 2).sum(), argnums=1)(a, b)
    assert unused.tolist() == [0.0, 0.0]
    (g, aux) = ndlite.grad(lambda t: ((t * t).sum(), "aux"), has_aux=True)(a)
    assert aux == "aux" and g.tolist() == [2.0, 4.0]


def test_setitem_on_a_non_leaf_is_differentiable():
    x = leaf([1.0, 2.0, 3.0])
    w = leaf([10.0])
    y = x * 2
    y[0] = 0.0
    y[1:2] = w
    (y * y).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 24.0]  # d/dx (2x)^2 = 8x at x = 3
    assert w.grad.tolist() == [20.0]


def test_in_place_arithmetic_on_a_non_leaf_uses_the_old_value():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    y = x * 1
    y.mul_(w)  # dy/dw needs y's value before the write
    y.add_(x)
    y.sum().backward()
    assert w.grad.tolist() == [1.0, 2.0]
    assert x.grad.tolist() == [3.0 + 1.0, 4.0 + 1.0]


def test_augmented_assignment_is_in_place():
    x = ndlite.zeros(3)
    alias = x
    x += 1
    x *= ndlite.tensor([1.0, 2.0, 3.0])
    assert alias is x and x.tolist() == [1.0, 2.0, 3.0]


def test_deep_graphs_do_not_recurse():
    x = leaf([1.0])
    y = x
    for _ in range(5000):
        y = y + 1
    y.backward()
    assert x.grad.tolist() == [1.0]


def test_gradient_flows_through_a_float_cast():
    x = leaf([1.5], dtype=ndlite.float32)
    y = x.double() * 2
    assert y.dtype == ndlite.float64
    y.sum().backward()
    assert x.grad.dtype == ndlite.float32 and x.grad.tolist() == [2.0]


def test_integer_results_carry_no_gradient():
    x = leaf([1.5, 2.5])
    assert not x.argmax().requires_grad
    assert not (x > 2).requires_grad
    assert not x.long().requires_grad


def test_first_gradient_is_not_shared_between_leaves():
    a, b = leaf([1.0]), leaf([1.0])
    (a + b).sum().backward()
    a.grad.zero_()
    assert b.grad.tolist() == [1.0]


def test_gradients_never_alias_the_callers_or_each_other():
    x = leaf([1.0, 2.0])
    g = ndlite.tensor([1.0, 1.0], dtype=ndlite.float64)
    x.backward(g)  # a leaf as the output: its gradient is the caller's tensor
    g.mul_(5)
    assert x.grad.tolist() == [1.0, 1.0]
    a, b = leaf([1.0]), leaf([[1.0]])
    y = a + b.reshape(1)  # add hands one buffer to both; reshape makes a view of it
    y.backward(ndlite.tensor([2.0], dtype=ndlite.float64))
    a.grad.zero_()
    assert b.grad.tolist() == [[2.0]]


def test_a_fresh_gradient_is_kept_without_a_copy():
    w = leaf(np.ones((3, 3)))
    x = ndlite.tensor(np.ones((2, 3)), dtype=ndlite.float64)
    ndlite.nn.functional.linear(x, w).sum().backward()
    assert w.grad._vbox is None and w.grad.tolist() == [[2.0] * 3] * 3


def test_fresh_leaf_gradients_are_kept_not_copied(monkeypatch):
    """A backward pass copies a leaf's first gradient only when the buffer may be held
    elsewhere; a fresh one is kept. The pass once knew held gradients by id alone, and a fresh
    gradient that got the id of a freed one was copied for nothing (most of a ResNet-18's
    weight gradients)."""
    from ndlite import graph

    ndlite.manual_seed(0)
    layers = []
    for _ in range(12):
        layers += [ndlite.nn.Linear(8, 8), ndlite.nn.Tanh()]
    model = ndlite.nn.Sequential(*layers)
    weights = {id(m.weight) for m in layers if isinstance(m, ndlite.nn.Linear)}
    seen = []
    original = graph.accumulate

    def accumulate(leaf, grad, create_graph, owned):
        if id(leaf) in weights:  # (a bias gradient is a view of a sum: copied, rightly)
            seen.append(owned)
        original(leaf, grad, create_graph, owned)

    monkeypatch.setattr(graph, "accumulate", accumulate)
    for _ in range(3):
        model.zero_grad()
        model(ndlite.randn(4, 8)).sum().backward()
    assert len(seen) == 3 * 12 and all(seen)


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (1, 3), (0, 3)], ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_first_order_backward_is_the_composed_one_bit_for_bit(shape, bias):
    """Linear's first-order backward runs on the buffers (no tensor per step); under
    create_graph it is composed of differentiable ops. Both make the same backend calls, so
    the same bits, and the same gradients as float64 math."""
    import numpy as np

    r = np.random.default_rng(5)
    arrays = [r.standard_normal(shape).astype(np.float32),
              r.standard_normal((4, 3)).astype(np.float32),
              r.standard_normal(4).astype(np.float32)]
    grad = r.standard_normal(shape[:-1] + (4,)).astype(np.float32)
    results = []
    for create_graph in (False, True):
        x, w, b = (ndlite.tensor(a, requires_grad=True) for a in arrays)
        out = ndlite.nn.functional.linear(x, w, b if bias else None)
        out.backward(ndlite.tensor(grad), create_graph=create_graph)
        results.append([t.grad.detach().numpy() for t in ((x, w, b) if bias else (x, w))])
    for fast, composed in zip(*results):
        assert fast.dtype == composed.dtype and fast.shape == composed.shape
        assert np.array_equal(fast.view(np.uint32), composed.view(np.uint32))
    x, w = (a.astype(np.float64) for a in arrays[:2])
    g = grad.astype(np.float64)
    np.testing.assert_allclose(results[0][0], g @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results[0][1], g.reshape(-1, 4).T @ x.reshape(-1, 3), rtol=1e-5,
                               atol=1e-5)
    if bias:
        np.testing.assert_allclose(results[0][2], g.reshape(-1, 4).sum(0), rtol=1e-5, atol=1e-5)
