"""The CuPy backend's sums over leading axes and over every axis but 1 (bias gradients:
columns.py) on each of their paths -- one launch for few rows or one chunk per channel, two
for more -- against float64 sums, the same bits run to run; and its multi-parameter optimizer
steps reusing a plan for buffers that keep their addresses (optim.py).

Skipped, saying why, where CuPy or a CUDA device is missing (CI has no GPU).
"""

import numpy as np
import pytest

from ndlite.device.registry import probe

BACKEND, WHY = probe("cupy")
if BACKEND is None:
    pytest.skip(f"backend cupy unavailable: {WHY}", allow_module_level=True)

import cupy  # noqa: E402
from ndlite_cupy import columns, kernels, optim  # noqa: E402

import ndlite  # noqa: E402

b = BACKEND


def _check(x, axes, got):
    want = x.astype(np.float64).sum(axis=axes)
    scale = np.abs(x.astype(np.float64)).sum(axis=axes)
    assert got.dtype == x.dtype and got.shape == want.shape
    eps = np.finfo(x.dtype).eps
    assert np.all(np.abs(cupy.asnumpy(got) - want) <= 2 * eps * scale + np.finfo(x.dtype).tiny)


@pytest.fixture
def launched(monkeypatch):
    """The names of the columns.cu kernels the test launches."""
    table, names = kernels.raw("columns"), []
    get = table.get
    monkeypatch.setattr(table, "get", lambda name, *types: names.append(name) or get(name, *types))
    return names


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows", [1, 3, columns.DIRECT_ROWS, columns.DIRECT_ROWS + 1, 70000])
def test_column_sum_on_both_paths(rows, dtype, launched):
    x = np.random.default_rng(rows).standard_normal((rows, 37)).astype(dtype)
    got = b.sum(cupy.asarray(x), (0,), False)
    _check(x, (0,), got)
    again = b.sum(cupy.asarray(x), (0,), False)
    assert (cupy.asnumpy(got).view(np.uint8) == cupy.asnumpy(again).view(np.uint8)).all()
    kept = b.sum(cupy.asarray(x.reshape(rows, 1, 37)), (0, 1), True)
    assert kept.shape == (1, 1, 37)
    one = rows <= columns.DIRECT_ROWS
    assert set(launched) == ({"ndl_column_direct"} if one else
                             {"ndl_column_partial", "ndl_column_finish"})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, one", [((2, 5, 3, 3), True), ((128, 64, 8, 8), True),
                                        ((128, 32, 24, 24), False), ((3, 70000, 1, 1), True),
                                        ((64, 3, 64, 64), False)])
def test_channel_sum_on_both_paths(shape, one, dtype, launched):
    c = shape[1]
    x = np.random.default_rng(c).standard_normal(shape).astype(dtype)
    got = b.sum(cupy.asarray(x), (0, 2, 3), False)
    _check(x, (0, 2, 3), got)
    kept = b.sum(cupy.asarray(x), (0, 2, 3), True)
    assert kept.shape == (1, c, 1, 1)
    assert (cupy.asnumpy(kept).ravel().view(np.uint8) == cupy.asnumpy(got).view(np.uint8)).all()
    assert set(launched) == ({"ndl_channel_direct"} if one else
                             {"ndl_channel_partial", "ndl_column_finish"})


def test_a_multi_parameter_step_reuses_its_plan_while_the_buffers_stay():
    rng = np.random.default_rng(0)
    params = [ndlite.nn.Parameter(ndlite.tensor(rng.standard_normal(s), dtype="float32",
                                                backend=b)) for s in [(5, 3), (7,), (4097,)]]
    twin = [ndlite.nn.Parameter(p.detach().clone()) for p in params]
    opt = ndlite.optim.Adam(params, lr=0.1)
    ref = ndlite.optim.Adam(twin, lr=0.1)
    grads = [ndlite.tensor(rng.standard_normal(p.shape), dtype="float32", backend=b)
             for p in params]
    optim._PLANS.clear()
    for _ in range(3):
        for p, q, g in zip(params, twin, grads):
            p.grad, q.grad = g, g.clone()  # the same gradient buffers in `params`, new in twin
        opt.step()
        for q in twin:  # the reference: one parameter at a time
            ref._bind(ref.param_groups[0])(q, q.grad, ref.state.setdefault(id(q), {}))
    ours = [k for k in optim._PLANS if k[0] == "ndl_adam_steps"]
    assert len(ours) == 1, "one plan for three steps over the same buffers"
    for p, q in zip(params, twin):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    for _ in range(2 * optim.PLANS_KEPT):  # new gradient buffers each step: new plans, kept few
        for p in params:
            p.grad = ndlite.tensor(rng.standard_normal(p.shape), dtype="float32", backend=b)
        opt.step()
    assert len(optim._PLANS) <= optim.PLANS_KEPT
