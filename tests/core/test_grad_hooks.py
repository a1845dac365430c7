"""Tensor.register_hook (ndlite/grad_hooks.py, graph.py): each case's expected values are
PyTorch 2.13's for the same program (checked side by side when this was written), worked out
here by hand so that the test needs no torch."""

import numpy as np
import pytest

import ndlite


def _t(values, backend=None, requires_grad=True):
    return ndlite.tensor(np.array(values, dtype=np.float64), backend=backend,
                         requires_grad=requires_grad)


def test_a_non_leaf_hook_sees_its_whole_gradient_once_and_may_replace_it():
    x = _t([1.0, 2.0])
    y = x * 3
    calls = []
    y.register_hook(lambda g: calls.append(g.tolist()) or g * 2)
    ((y * 2).sum() + (y * 5).sum()).backward()
    assert calls == [[7.0, 7.0]]  # 2 + 5, summed before the hook
    assert x.grad.tolist() == [42.0, 42.0]  # 7 * 2 * 3


def test_a_leaf_hook_sees_the_sum_of_every_piece_slices_included(backend):
    x = _t([1.0, 2.0, 3.0], backend)
    calls = []
    x.register_hook(lambda g: calls.append(g.tolist()) or None)
    (x[0] * 2 + x[1:].sum() * 3 + (x * x).sum()).backward()
    assert calls == [[4.0, 7.0, 9.0]]
    assert x.grad.tolist() == [4.0, 7.0, 9.0]


def test_retain_grad_and_autograd_grad_see_the_hooked_gradient():
    x = _t([1.0, 2.0])
    y = x * 1
    y.retain_grad()
    y.register_hook(lambda g: g + 1)
    (y * 4).sum().backward()
    assert y.grad.tolist() == [5.0, 5.0] and x.grad.tolist() == [5.0, 5.0]
    x = _t([1.0, 2.0])
    y = x * x
    x.register_hook(lambda g: g * 10)
    y.register_hook(lambda g: g * 100)
    (gx,) = ndlite.autograd.grad(y.sum(), [x], retain_graph=True)
    (gy,) = ndlite.autograd.grad(y.sum(), [y])
    assert gx.tolist() == [2000.0, 4000.0] and gy.tolist() == [100.0, 100.0]


def test_hooks_before_and_after_an_in_place_op_see_the_old_and_the_new_value():
    x = _t([1.0, 2.0])
    y = x * 1
    calls = []
    y.register_hook(lambda g: calls.append(("old", g.tolist())) or None)
    y.mul_(2)
    y.register_hook(lambda g: calls.append(("new", g.tolist())) or None)
    (y * 3).sum().backward()
    assert calls == [("new", [3.0, 3.0]), ("old", [6.0, 6.0])]
    assert x.grad.tolist() == [6.0, 6.0]


def test_second_order_gradients_flow_through_a_hook():
    x = _t([1.0, 2.0])
    y = x * x
    y.register_hook(lambda g: g * 3)
    (g,) = ndlite.autograd.grad(y.sum(), [x], create_graph=True)
    g.sum().backward()
    assert g.tolist() == [6.0, 12.0] and x.grad.tolist() == [6.0, 6.0]


def test_leaf_hooks_run_before_accumulation_and_post_accumulate_hooks():
    x = _t([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(("pre", g.tolist())) or g * 2)
    x.register_post_accumulate_grad_hook(lambda p: seen.append(("post", p.grad.tolist())))
    (x * 1).sum().backward()
    (x * 2).sum().backward()
    assert seen == [("pre", [1.0, 1.0]), ("post", [2.0, 2.0]),
                    ("pre", [2.0, 2.0]), ("post", [6.0, 6.0])]
    x = _t([1.0, 2.0])
    x.register_hook(lambda g: g * 3)
    x.backward(_t([1.0, 1.0], requires_grad=False))  # a leaf as the output itself
    assert x.grad.tolist() == [3.0, 3.0]
    loss = (x * 2).sum()
    loss.register_hook(lambda g: g * 5)  # on the root
    x.grad = None
    loss.backward()
    assert x.grad.tolist() == [30.0, 30.0]  # x's own hook too: 5 * 2 * 3


def test_a_returned_gradient_is_copied_before_it_becomes_a_grad():
    x = _t([1.0, 2.0])
    kept = _t([7.0, 7.0], requires_grad=False)
    x.register_hook(lambda g: kept)
    (x * 1).sum().backward()
    x.grad.mul_(0)
    assert kept.tolist() == [7.0, 7.0]


def test_removal_and_errors():
    x = _t([1.0])
    handle = x.register_hook(lambda g: g * 7)
    handle.remove()
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0]
    with x.register_hook(lambda g: g * 7):
        x.grad = None
        (x * 1).sum().backward()
    assert x.grad.tolist() == [7.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        _t([1.0], requires_grad=False).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="callable"):
        x.register_hook(3)
    y = x * 2
    y.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match=r"returned shape \(\), .* for a gradient of shape "
                                           r"\(1,\)"):
        y.backward(_t([1.0], requires_grad=False))


def test_a_leaf_hook_keeps_what_it_saw_and_autograd_grad_hooks_only_its_inputs():
    # the hooked gradient became .grad itself, so clip_grad_norm_ rescaled what the hook kept
    x = _t([3.0, 4.0])
    seen = []
    x.register_hook(lambda g: seen.append(g))
    (x * x).sum().backward()
    ndlite.nn.utils.clip_grad_norm_([x], 1.0)
    assert seen[0].tolist() == [6.0, 8.0]
    # autograd.grad(..., [x2]) ran the hook of a leaf it was not asked about
    w, x2, log = _t([1.0, 2.0]), _t([1.0, 2.0]), []
    w.register_hook(lambda g: log.append("w"))
    ndlite.autograd.grad((w * 2 * x2).sum(), [x2])
    assert log == []


def test_second_derivatives_of_products_with_zeros_are_pytorchs():
    x = _t([2.0, 0.0, 3.0])
    (g,) = ndlite.autograd.grad(x.prod(), [x], create_graph=True)
    assert g.tolist() == [0.0, 6.0, 0.0]
    (h,) = ndlite.autograd.grad(g[2], [x])
    assert h.tolist() == [0.0, 2.0, 0.0]  # d/dx1 of x0 x1 is x0: the zero's own dependence
