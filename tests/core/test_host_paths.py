"""The host-time shortcuts of issue 15 item 3 (docs/DESIGN.md, "Host time per op"): first-order
backward passes that make their backend calls on the buffers must give bit for bit what the
op-by-op path gives (the one create_graph=True takes; log_softmax's is one fused call on the GPU
backends, within a few ulp), and the caches of checked arguments
(conv2d's geometry, expand's shape, reduction axes) must never let a bad argument through
after a good one was cached."""

import numpy as np
import pytest

import ndlite
from ndlite.device import step_fallbacks
from ndlite.errors import ShapeError

F = ndlite.nn.functional


def _grads(fn, arrays, backend, create_graph: bool):
    """d sum(fn(*x) * w) / dx for fixed random w, first order or through create_graph."""
    xs = [ndlite.tensor(a, backend=backend, requires_grad=True) for a in arrays]
    out = fn(*xs)
    w = ndlite.tensor(np.random.default_rng(7).standard_normal(out.shape).astype(out.dtype),
                      backend=backend)
    grads = ndlite.autograd.grad((out * w).sum(), xs, create_graph=create_graph)
    return [g.detach().numpy() for g in grads]


CASES = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
               [(2, 3, 7, 6), (4, 3, 3, 3), (4,)]),
    "conv2d_groups_dilation": (lambda x, w: F.conv2d(x, w, groups=2, dilation=2, padding=2),
                               [(1, 4, 6, 6), (6, 2, 3, 3)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [(2, 3, 7, 7)]),
    "log_softmax": (lambda x: F.log_softmax(x, 1), [(3, 5, 2)]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_first_order_backward_on_buffers_is_the_op_path(backend, case, dtype):
    if np.dtype(dtype) not in backend.dtypes:
        pytest.skip(f"{backend.name} has no {dtype}")
    fn, shapes = CASES[case]
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    fast = _grads(fn, arrays, backend, create_graph=False)
    composed = _grads(fn, arrays, backend, create_graph=True)
    fused = case == "log_softmax" and backend._layer_kernels is not step_fallbacks
    for a, b in zip(fast, composed, strict=True):
        if fused:  # one log_softmax_grad kernel (step_fallbacks.py): its own order of sums
            eps = np.finfo(dtype).eps
            np.testing.assert_allclose(a, b, rtol=8 * eps, atol=8 * eps * np.abs(b).max())
        else:
            assert a.tobytes() == b.tobytes()


def test_conv2d_geometry_cache_lets_no_bad_argument_through():
    x, w = ndlite.ones(1, 2, 5, 5), ndlite.ones(3, 2, 3, 3)
    assert F.conv2d(x, w, stride=1, padding=1).shape == (1, 3, 5, 5)  # cached now
    with pytest.raises(TypeError, match="stride"):
        F.conv2d(x, w, stride=True, padding=1)  # True == 1, but a bool is no stride
    with pytest.raises(ShapeError, match="bias"):
        F.conv2d(x, w, ndlite.ones(2), stride=1, padding=1)
    with pytest.raises(ValueError, match="groups"):
        F.conv2d(x, w, stride=1, padding=1, groups=0)
    with pytest.raises(ShapeError, match="channels"):
        F.conv2d(ndlite.ones(1, 3, 5, 5), w, stride=1, padding=1)


def test_conv2d_asymmetric_same_padding_pads_first():
    x, w = ndlite.ones(1, 1, 4, 4), ndlite.ones(1, 1, 2, 2)
    for _ in range(2):  # the second call takes the same path as the first
        out = F.conv2d(x, w, padding="same")
        assert out.shape == (1, 1, 4, 4)
        assert out.numpy()[0, 0].tolist() == [[4.0] * 3 + [2.0]] * 3 + [[2.0] * 3 + [1.0]]


def test_expand_and_axes_caches_let_no_bad_argument_through():
    x = ndlite.ones(1, 3)
    assert x.expand(2, 3).shape == (2, 3)
    with pytest.raises(ShapeError, match="cannot be expanded"):
        ndlite.ones(2, 3).expand(4, 3)
    with pytest.raises(ShapeError, match="-1 is not allowed"):
        x.expand(-1, 2, 3)
    y = ndlite.ones(2, 3, 4)
    assert y.sum((0, 2)).shape == (3,)
    with pytest.raises(ShapeError, match="repeats"):
        y.sum((0, 0))
    with pytest.raises(ShapeError, match="out of range"):
        y.sum((0, 3))


def test_adaptive_avg_pool2d_constants_are_not_shared_with_results(backend):
    x = ndlite.tensor(np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4), backend=backend)
    first = F.adaptive_avg_pool2d(x, 2)
    first.mul_(0.0)  # writing into one result changes no later one
    again = F.adaptive_avg_pool2d(x, 2)
    want = np.arange(32, dtype=np.float32).reshape(1, 2, 2, 2, 2, 2).mean((3, 5))
    np.testing.assert_allclose(again.numpy(), want, rtol=1e-6)


def test_batch_norm_counts_batches_through_add():
    bn = ndlite.nn.BatchNorm2d(2)
    x = ndlite.randn(4, 2, 3, 3)
    for _ in range(3):
        bn(x)
    assert bn.num_batches_tracked.item() == 3
    version = bn.num_batches_tracked._version
    bn(x)
    assert bn.num_batches_tracked.item() == 4 and bn.num_batches_tracked._version == version + 1
    view = bn.num_batches_tracked.reshape(1)  # a viewed counter takes add_ itself
    bn(x)
    assert view.tolist() == [5]
    bn.momentum = None  # the cumulative average reads the count
    bn.eval()
    bn(x)
    assert bn.num_batches_tracked.item() == 5
