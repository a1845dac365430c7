"""ops/composite_more.py: movedim, diff, tensordot, cross, kron, cdist, unfold, index_add,
index_fill (against NumPy on every backend, gradients against finite differences) and the
host-computed unique, bincount, searchsorted, bucketize. (Each was also run side by side with
PyTorch 2.13 CPU, values, dtypes and gradients, when written.)"""

import numpy as np
import pytest

import ndlite
from ndlite.testing.gradcheck import gradcheck

R = np.random.default_rng(4)
A, B, C3 = R.standard_normal((3, 4)), R.standard_normal((4, 5)), R.standard_normal((2, 3, 4))


def _t(a, backend, dtype=ndlite.float32):
    return ndlite.tensor(np.asarray(a), dtype=dtype, backend=backend)


def _close(t, expected):
    np.testing.assert_allclose(t.detach().numpy(), expected, rtol=1e-5, atol=1e-5)


def test_differentiable_composites_against_numpy(backend):
    a, c = _t(A, backend), _t(C3, backend)
    _close(c.movedim(0, -1), np.moveaxis(C3, 0, -1))
    _close(ndlite.moveaxis(c, (0, 1), (2, 0)), np.moveaxis(C3, (0, 1), (2, 0)))
    _close(ndlite.diff(a, n=2, dim=0), np.diff(A, n=2, axis=0))
    _close(a.diff(dim=1, prepend=a[:, :1]), np.diff(A, axis=1, prepend=A[:, :1]))
    _close(ndlite.tensordot(c, a, dims=([1, 2], [0, 1])), np.tensordot(C3, A, ([1, 2], [0, 1])))
    _close(ndlite.tensordot(a, _t(B, backend), dims=1), A @ B)
    v, w = R.standard_normal((4, 3)), R.standard_normal((4, 3))
    _close(ndlite.cross(_t(v, backend), _t(w, backend), dim=1), np.cross(v, w))
    _close(ndlite.kron(a[:2, :2], _t(B[:2, :3], backend)), np.kron(A[:2, :2], B[:2, :3]))
    x1, x2 = R.standard_normal((5, 3)), R.standard_normal((4, 3))
    _close(ndlite.cdist(_t(x1, backend), _t(x2, backend)),
           np.linalg.norm(x1[:, None] - x2[None], axis=-1))
    windows = np.stack([A[:, i:i + 2] for i in (0, 2)], 1)
    _close(a.unfold(1, 2, 2), windows)
    index = np.array([2, 0, 2, 1, 0])
    source = np.arange(20.0).reshape(5, 4)
    expected = A.copy()
    np.add.at(expected, index, 0.5 * source)
    _close(ndlite.index_add(a, 0, _t(index, backend, ndlite.int64), _t(source, backend),
                            alpha=0.5), expected)
    filled = A.copy()
    filled[:, [0, 2]] = -1.5
    _close(a.index_fill(1, _t([0, 2], backend, ndlite.int64), -1.5), filled)


@pytest.mark.parametrize("name,fn,shapes", [
    ("diff", lambda t: ndlite.diff(t[0], n=2, dim=1, append=t[1]), [(3, 4), (3, 2)]),
    ("tensordot", lambda t: ndlite.tensordot(t[0], t[1], dims=([1, 2], [0, 1])),
     [(2, 3, 4), (3, 4)]),
    ("cross", lambda t: ndlite.cross(t[0], t[1], dim=-1), [(4, 3), (4, 3)]),
    ("kron", lambda t: ndlite.kron(t[0], t[1]), [(2, 3), (3, 2)]),
    ("cdist", lambda t: ndlite.cdist(t[0], t[1], p=3.0), [(2, 5, 3), (2, 4, 3)]),
    ("unfold", lambda t: t[0].unfold(2, 3, 1), [(2, 3, 4)]),
    ("index_add", lambda t: ndlite.index_add(t[0], 1, ndlite.tensor([3, 3, 0]), t[1]),
     [(3, 4), (3, 3)]),
    ("index_fill", lambda t: t[0].index_fill(0, ndlite.tensor([1]), 2.0), [(3, 4)]),
    ("movedim", lambda t: t[0].movedim(2, 0) * t[0].movedim(2, 0), [(2, 3, 4)]),
])
def test_gradients_against_finite_differences(name, fn, shapes):
    inputs = [R.standard_normal(s) for s in shapes]
    gradcheck(fn, inputs, list(range(len(inputs))), name=name)


def test_cdist_of_equal_rows_has_a_zero_gradient():
    x = ndlite.tensor([[1.0, 2.0]], requires_grad=True)
    ndlite.cdist(x, ndlite.tensor([[1.0, 2.0], [4.0, 6.0]])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[-0.6, -0.8]])  # the equal row adds 0


def test_host_functions_against_numpy(backend):
    i = np.array([3, 1, 3, 2, 0, 3])
    t = _t(i, backend, ndlite.int64)
    values, inverse, counts = ndlite.unique(t, return_inverse=True, return_counts=True)
    expected = np.unique(i, return_inverse=True, return_counts=True)
    assert [values.tolist(), inverse.tolist(), counts.tolist()] == [e.tolist() for e in expected]
    assert ndlite.unique(_t([[1, 2], [1, 2], [0, 5]], backend, ndlite.int64),
                         dim=0).tolist() == [[0, 5], [1, 2]]
    assert ndlite.bincount(t, minlength=6).tolist() == np.bincount(i, minlength=6).tolist()
    weighted = ndlite.bincount(t, weights=_t(np.linspace(0, 1, 6), backend))
    assert weighted.dtype == ndlite.float32
    _close(weighted, np.bincount(i, weights=np.linspace(0, 1, 6)))
    s, q = np.sort(R.standard_normal(6)), R.standard_normal((2, 3))
    found = ndlite.searchsorted(_t(s, backend), _t(q, backend))
    assert found.dtype == ndlite.int64 and found.tolist() == np.searchsorted(s, q).tolist()
    assert ndlite.bucketize(_t(s, backend), _t(s, backend), right=True).tolist() == \
        np.searchsorted(s, s, side="right").tolist()
    rows = np.sort(q, 1)
    assert ndlite.searchsorted(_t(rows, backend), _t(q, backend), side="right").tolist() == \
        [np.searchsorted(r, v, side="right").tolist() for r, v in zip(rows, q)]


def test_errors_name_the_op():
    a = ndlite.tensor(A)
    with pytest.raises(ndlite.ShapeError, match="tensordot: contracted dims"):
        ndlite.tensordot(a, a, dims=([1], [1, 0]))
    with pytest.raises(ndlite.ShapeError, match="cross: no dim of size 3"):
        ndlite.cross(a[:2], a[:2])
    with pytest.raises(ndlite.ShapeError, match="unfold: size 5 and step 1"):
        a.unfold(1, 5, 1)
    with pytest.raises(ndlite.DTypeError, match="bincount: expected a 1-D integer tensor"):
        ndlite.bincount(a)
    with pytest.raises(ValueError, match="movedim: 1 source dims for 2 destinations"):
        a.movedim(0, (0, 1))
    b = ndlite.tensor(A)
    with pytest.raises(ndlite.ShapeError, match="index_add: index of shape"):
        b.index_add_(0, ndlite.tensor([0, 1]), ndlite.ones(3, 4))
    np.testing.assert_array_equal(b.numpy(), A)  # a failed in-place op changes nothing


def test_reductions_and_shape_helpers_against_numpy(backend):
    n = A.copy()
    n[1, 2] = np.nan
    t = _t(n, backend)
    _close(ndlite.nansum(t, 1), np.nansum(n, 1))
    _close(t.nanmean(0), np.nanmean(n, 0))
    assert ndlite.count_nonzero(_t([[0, 1, 2], [0, 0, 3]], backend, ndlite.int64),
                                dim=1).tolist() == [2, 1]
    low, high = ndlite.aminmax(_t(A, backend), dim=1)
    _close(low, A.min(1))
    _close(high, A.max(1))
    v, m = ndlite.var_mean(_t(A, backend), 1, unbiased=False)
    _close(v, A.var(1))
    _close(m, A.mean(1))
    for q, kw in ((0.3, {}), (0.3, {"dim": 1}), (0.375, {"dim": 0, "interpolation": "nearest"}),
                  (0.4, {"dim": 1, "interpolation": "midpoint"})):
        np_kw = {"axis": kw.get("dim"), "method": kw.get("interpolation", "linear")}
        _close(ndlite.quantile(_t(A, backend), q, **kw), np.quantile(A, q, **np_kw))
    qs = _t([0.25, 0.75], backend)
    _close(ndlite.quantile(_t(A, backend), qs, dim=1, keepdim=True),
           np.quantile(A, [0.25, 0.75], axis=1, keepdims=True))
    counts = ndlite.histc(_t(A, backend), bins=4, min=-1, max=1)
    _close(counts, np.histogram(A, bins=4, range=(-1, 1))[0])
    assert [x.shape for x in ndlite.broadcast_tensors(_t(A[:, :1], backend),
                                                      _t(A[0], backend))] == [(3, 4), (3, 4)]
    assert ndlite.atleast_3d(_t(A[0], backend)).shape == (1, 4, 1)
    _close(ndlite.dstack([_t(A, backend)] * 2), np.dstack([A, A]))
    _close(ndlite.column_stack([_t(A[0], backend), _t(A[1], backend)]),
           np.column_stack([A[0], A[1]]))
    _close(ndlite.mv(_t(A, backend), _t(A[0], backend)), A @ A[0])
    _close(ndlite.vdot(_t(A[0], backend), _t(A[1], backend)), A[0] @ A[1])


@pytest.mark.parametrize("name,fn", [
    ("quantile", lambda t: ndlite.quantile(t[0], ndlite.tensor([0.2, 0.9]), dim=1)),
    ("nanmean", lambda t: ndlite.nanmean(t[0], 0)),
    ("std_mean", lambda t: ndlite.std_mean(t[0], 1)[0] * ndlite.std_mean(t[0], 1)[1]),
])
def test_reduction_gradients_against_finite_differences(name, fn):
    gradcheck(fn, [R.standard_normal((3, 5))], [0], name=name)
