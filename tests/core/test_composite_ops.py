"""PyTorch's composite functions (ndlite/ops/composite.py) and the in-place methods built on
them (ops/inplace_more.py): values against NumPy on every backend, gradients against float64
finite differences, errors that name the op. (Each was also run side by side with PyTorch
2.13 CPU, values and gradients, when written.)"""

import numpy as np
import pytest

import ndlite
from ndlite.testing.gradcheck import gradcheck

R = np.random.default_rng(0)
A, B, W = R.standard_normal((3, 4)), R.standard_normal((3, 4)), R.random((3, 4))


def _t(a, backend, dtype=ndlite.float32):
    return ndlite.tensor(np.asarray(a), dtype=dtype, backend=backend)


def _close(t, expected, rtol=1e-5):
    np.testing.assert_allclose(t.detach().numpy(), expected, rtol=rtol, atol=1e-6)


def test_arithmetic_composites_against_numpy(backend):
    a, b, w = _t(A, backend), _t(B, backend), _t(W, backend)
    _close(ndlite.lerp(a, b, 0.3), A + 0.3 * (B - A))
    _close(a.lerp(b, w), A + W * (B - A))
    c = _t(A[:, :3], backend)
    _close(ndlite.addmm(c, a, b.t(), beta=0.5, alpha=2.0), 0.5 * A[:, :3] + 2 * A @ B.T)
    nan = _t(np.full((3, 3), np.nan), backend)
    assert np.isfinite(ndlite.addmm(nan, a, b.t(), beta=0).numpy()).all()  # input not read
    batch = R.standard_normal((2, 3, 4))
    _close(ndlite.baddbmm(_t(np.ones((2, 3, 3)), backend), _t(batch, backend),
                          _t(batch.transpose(0, 2, 1), backend), alpha=0.5),
           1 + 0.5 * batch @ batch.transpose(0, 2, 1), rtol=1e-4)
    _close(a.addcmul(b, w, value=0.5), A + 0.5 * B * W)
    _close(ndlite.addcdiv(a, b, w + 3, value=2), A + 2 * B / (W + 3))
    _close(a.clamp_min(0.1), np.maximum(A, 0.1))
    _close(ndlite.clamp_max(a, 0.1), np.minimum(A, 0.1))
    _close(a.softmax(-1), np.exp(A) / np.exp(A).sum(-1, keepdims=True))
    _close(ndlite.log_softmax(a, 0), A - np.log(np.exp(A).sum(0, keepdims=True)))
    assert abs(ndlite.erf(_t([0.5], backend)).item() - 0.5204998778) < 1e-6


def test_shape_composites_against_numpy(backend):
    a = _t(A, backend)
    for k in (0, 1, -1, 5):
        _close(ndlite.diag(a, k), np.diag(A, k))
        _close(ndlite.diag(a[0], k), np.diag(A[0], k))
    assert [t.shape for t in a.unbind(1)] == [(3,)] * 4
    _close(a.unbind(1)[2], A[:, 2])
    _close(a.repeat_interleave(2), np.repeat(A.ravel(), 2))
    _close(a.repeat_interleave(3, dim=1), np.repeat(A, 3, axis=1))
    counts = np.array([2, 0, 1, 3])
    _close(a.repeat_interleave(_t(counts, backend, ndlite.int64), dim=1),
           np.repeat(A, counts, axis=1))
    assert ndlite.repeat_interleave(_t([2, 0, 3], backend, ndlite.int64)).tolist() == \
        [0, 0, 2, 2, 2]
    _close(a.masked_select(a > 0), A[A > 0])
    _close(ndlite.masked_select(a, _t(A[0] > 0, backend, ndlite.bool_)),
           A[np.broadcast_to(A[0] > 0, A.shape)])
    _close(ndlite.vstack([a[0], a[1]]), np.vstack([A[0], A[1]]))
    _close(ndlite.hstack([a, a]), np.hstack([A, A]))
    _close(ndlite.hstack([a[0], a[1]]), np.hstack([A[0], A[1]]))


def test_selection_and_classification_against_numpy(backend):
    a = _t(A, backend)
    found = ndlite.nonzero(a > 0)
    assert found.dtype == ndlite.int64 and found.tolist() == np.argwhere(A > 0).tolist()
    assert [t.tolist() for t in (a > 0).nonzero(as_tuple=True)] == \
        [i.tolist() for i in np.nonzero(A > 0)]
    assert ndlite.nonzero(_t(2.0, backend)).shape == (1, 0)
    assert ndlite.nonzero(_t(np.zeros((0, 3)), backend)).shape == (0, 2)
    g = np.array([1.0, np.nan, np.inf, -np.inf, 1.05, np.nan, 0.0, 2.0])
    h = np.array([1.0, np.nan, np.inf, np.inf, 1.0, 1.0, 1e-9, np.nan])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2, "atol": 0.1}):
        got = ndlite.isclose(_t(g, backend, ndlite.float64), _t(h, backend, ndlite.float64), **kw)
        assert got.tolist() == np.isclose(g, h, **kw).tolist(), kw
    big = float(np.finfo(np.float32).max)
    assert ndlite.nan_to_num(_t(g, backend)).tolist() == \
        [1.0, 0.0, big, -big, pytest.approx(1.05), 0.0, 0.0, 2.0]
    assert _t(g, backend).nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0).tolist()[:4] == \
        [1.0, 1.0, 2.0, -3.0]


@pytest.mark.parametrize("name,fn,shapes", [
    ("lerp", lambda t: ndlite.lerp(t[0], t[1], t[2]), [(3, 4), (3, 4), (3, 4)]),
    ("addmm", lambda t: ndlite.addmm(t[0], t[1], t[2], beta=0.5, alpha=2.0),
     [(3, 2), (3, 4), (4, 2)]),
    ("baddbmm", lambda t: ndlite.baddbmm(t[0], t[1], t[2], beta=2.0),
     [(2, 3, 2), (2, 3, 4), (2, 4, 2)]),
    ("addcdiv", lambda t: ndlite.addcdiv(t[0], t[1], t[2] * t[2] + 1.0, value=0.5),
     [(3, 4), (3, 4), (3, 4)]),
    ("diag of a matrix", lambda t: ndlite.diag(t[0], -1), [(4, 3)]),
    ("diag of a vector", lambda t: ndlite.diag(t[0], 2), [(3,)]),
    ("repeat_interleave", lambda t: t[0].repeat_interleave(
        ndlite.tensor([1, 0, 3], backend=t[0].backend), dim=0), [(3, 2)]),
    ("unbind", lambda t: t[0].unbind(1)[1] * t[0].unbind(0)[0][1], [(3, 4)]),
    ("masked_select", lambda t: t[0].masked_select(t[1] > 0), [(3, 4), (3, 4)]),
    ("nan_to_num", lambda t: ndlite.nan_to_num(t[0].log()), [(3, 4)]),
])
def test_gradients_against_finite_differences(name, fn, shapes):
    inputs = [R.standard_normal(s) for s in shapes]
    gradcheck(fn, inputs, [i for i in range(len(inputs)) if name != "masked_select" or i == 0],
              name=name)


def test_in_place_methods_write_the_out_of_place_result(backend):
    for name in ("exp", "sqrt", "sigmoid", "tanh", "abs", "sign", "erf", "reciprocal",
                 "rsqrt", "square", "sin", "cos", "log1p", "expm1", "floor", "ceil", "trunc",
                 "round", "log"):
        x = _t(W + 0.5, backend)
        expected = getattr(x, name)().numpy()
        assert getattr(x, name + "_")() is x
        np.testing.assert_array_equal(x.numpy(), expected, err_msg=name)
    x, end = _t(A, backend), _t(B, backend)
    x.lerp_(end, 0.25).addcmul_(end, end, value=2).addcdiv_(end, _t(W + 1, backend))
    x.clamp_min_(-0.5).clamp_max_(0.5)
    expected = A + 0.25 * (B - A)
    expected = np.clip(expected + 2 * B * B + B / (W + 1), -0.5, 0.5)
    _close(x, expected)


def test_in_place_methods_are_differentiable_on_non_leaves_and_refused_on_leaves():
    def ema(t):
        y = t[0] * 1.0
        y.lerp_(t[1], 0.3)
        return y.sigmoid_()

    gradcheck(ema, [A, B], [0, 1], name="lerp_ then sigmoid_")
    leaf = ndlite.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="exp_: a leaf tensor that requires grad"):
        leaf.exp_()
    with pytest.raises(RuntimeError, match="lerp_: a leaf tensor that requires grad"):
        leaf.lerp_(ndlite.tensor(B), 0.5)


def test_errors_name_the_op():
    a = ndlite.tensor(A)
    with pytest.raises(ndlite.DTypeError, match="addcdiv: integer division"):
        ndlite.addcdiv(a, ndlite.tensor([1, 2]), ndlite.tensor([1, 2]))
    with pytest.raises(ndlite.ShapeError, match="repeat_interleave: 2 repeats for a dim of "
                                                "size 3"):
        a.repeat_interleave(ndlite.tensor([1, 2]), dim=0)
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be >= 0"):
        a.repeat_interleave(-1)
    with pytest.raises(ndlite.ShapeError, match=r"diag: expected a 1-D or 2-D tensor, got "
                                                r"shape \(1, 3, 4\)"):
        ndlite.diag(a.unsqueeze(0))
    with pytest.raises(ndlite.ShapeError, match="unbind: a 0-d tensor"):
        ndlite.unbind(ndlite.tensor(1.0))
    with pytest.raises(IndexError, match="unbind: dim 2 is out of range"):
        a.unbind(2)
    with pytest.raises(ndlite.DTypeError, match="masked_select: expected a bool mask"):
        a.masked_select(ndlite.ones(3, 4))
    assert a.element_size() == 8 and a.nbytes == 96


def test_review_findings_stay_fixed():
    # clamp_min_ to a bound that requires grad records the graph (it was dropped)
    b = ndlite.tensor([0.5, 0.5, 0.5], requires_grad=True)
    y = ndlite.tensor([0.0, 1.0, 2.0]).clamp_min_(b)
    (y.sum() + b.sum()).backward()
    assert b.grad.tolist() == [2.0, 1.0, 1.0]
    # isclose applies the tolerances to integers too
    assert ndlite.isclose(ndlite.tensor([100000, 10]), ndlite.tensor([100001, 11]),
                          rtol=0.2).tolist() == [True, True]
    assert ndlite.logical_and(ndlite.tensor([1.0, 0.0]), 2.5).tolist() == [True, False]
    assert ndlite.hstack([ndlite.tensor(1.0), ndlite.tensor(2.0)]).tolist() == [1.0, 2.0]
    with pytest.raises(ndlite.ShapeError, match=r"addmm: input of shape \(2, 3, 4\)"):
        ndlite.addmm(ndlite.ones(2, 3, 4), ndlite.ones(3, 2), ndlite.ones(2, 4))
    with pytest.raises(ndlite.ShapeError, match="masked_select: input of shape"):
        ndlite.ones(3, 4).masked_select(ndlite.ones(2, 4).bool())
