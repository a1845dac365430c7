"""group_norm / rms_norm and their layers (ndlite/ops/norms.py, ndlite/nn/layers_more.py) and
the SmoothL1Loss / HuberLoss / KLDivLoss modules: values against float64 NumPy formulas,
gradients against finite differences (first and second order) on every backend, and
PyTorch where it is installed."""

import dataclasses
import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ndlite
import ndlite.nn.functional as F
from ndlite import nn
from ndlite.errors import ShapeError
from ndlite.ops import OPS, norms
from ndlite.testing import gradcheck, gradgradcheck, strategy

# ---- NumPy references ---------------------------------------------------------------------------


def group_norm_ref(x, num_groups, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    g = x.reshape(n, num_groups, -1)
    mean = g.mean(axis=2, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=2, keepdims=True)
    out = ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def rms_norm_ref(x, normalized_shape, weight=None, eps=None):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    eps = np.finfo(x.dtype).eps if eps is None else eps
    out = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return out if weight is None else out * weight


def _case(name):
    return strategy(OPS[name].spec, "float64")


def _ref_args(case):
    """The case's inputs and params as the NumPy reference's arguments."""
    x, rest = case.inputs[0], list(case.inputs[1:]) + [None, None]
    if "num_groups" in case.params:
        return group_norm_ref(x, case.params["num_groups"], rest[0], rest[1], case.params["eps"])
    return rms_norm_ref(x, case.params["normalized_shape"], rest[0], case.params["eps"])


# ---- torch-free ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["group_norm", "rms_norm"])
@settings(max_examples=30)
@given(data=st.data())
def test_values_match_the_numpy_formula(name, data, backend):
    case = data.draw(_case(name))
    fn = OPS[name].function
    out = case.call(fn, [ndlite.tensor(a, backend=backend) for a in case.inputs])
    np.testing.assert_allclose(out.numpy(), _ref_args(case), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["group_norm", "rms_norm"])
@settings(max_examples=15)
@given(data=st.data())
def test_first_and_second_order_finite_differences(name, data, backend):
    case = data.draw(_case(name))
    fn = OPS[name].function
    grad = list(range(len(case.inputs)))
    gradcheck(lambda t: case.call(fn, t), case.inputs, grad, backend=backend, name=name)
    gradgradcheck(lambda t: case.call(fn, t), case.inputs, grad, backend=backend, name=name)


def test_rms_norm_default_eps_is_the_dtype_machine_epsilon():
    x = np.array([[1e-4, -1e-4, 2e-4]])
    for dtype in ("float32", "float64"):
        out = F.rms_norm(ndlite.tensor(x, dtype=dtype), [3]).numpy()
        expected = rms_norm_ref(x.astype(dtype).astype(np.float64), [3],
                                eps=float(np.finfo(dtype).eps))
        np.testing.assert_allclose(out, expected, rtol=1e-5)
    # float32's epsilon (1.2e-7) is not negligible against a mean square of 2e-8 there
    assert abs(F.rms_norm(ndlite.tensor(x, dtype="float32"), 3).numpy()[0, 2]) < 1.0
    assert F.rms_norm(ndlite.tensor(x), 3).numpy()[0, 2] == pytest.approx(2 / np.sqrt(2),
                                                                          rel=1e-6)


def test_group_norm_one_group_per_channel_is_instance_norm_and_one_group_layer_norm():
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 3))
    per_channel = F.group_norm(ndlite.tensor(x), 4).numpy()
    mean, var = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(per_channel, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-10)
    whole = F.group_norm(ndlite.tensor(x), 1).numpy()
    ln = F.layer_norm(ndlite.tensor(x), x.shape[1:]).numpy()
    np.testing.assert_allclose(whole, ln, rtol=1e-10, atol=1e-12)


def test_docstring_examples_run():
    for module in (norms, nn.loss):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_norm_errors_name_the_op_and_shapes():
    with pytest.raises(ShapeError, match="group_norm.*divisible by num_groups=4"):
        F.group_norm(ndlite.ones(2, 6, 3), 4)
    with pytest.raises(ShapeError, match="group_norm: weight"):
        F.group_norm(ndlite.ones(2, 6, 3), 3, ndlite.ones(3))
    with pytest.raises(ShapeError, match="group_norm: expected an input of at least 2"):
        F.group_norm(ndlite.ones(6), 3)
    with pytest.raises(ShapeError, match=r"rms_norm: normalized_shape \(4,\)"):
        F.rms_norm(ndlite.ones(2, 3), [4])
    with pytest.raises(ShapeError, match="rms_norm: weight"):
        F.rms_norm(ndlite.ones(2, 3), [3], ndlite.ones(2))
    with pytest.raises(ShapeError, match="at least one element"):
        F.rms_norm(ndlite.ones(2, 3), [])
    with pytest.raises(ValueError, match="GroupNorm"):
        nn.GroupNorm(4, 6)


def test_norm_layers(backend):
    gn = nn.GroupNorm(2, 4, eps=1e-3).to(backend)
    assert gn.weight.shape == (4,) and np.all(gn.bias.detach().numpy() == 0)
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    out = gn(ndlite.tensor(x, backend=backend))
    np.testing.assert_allclose(out.detach().numpy(), group_norm_ref(x.astype(np.float64), 2,
                                                                   eps=1e-3), rtol=1e-4,
                               atol=1e-5)
    out.sum().backward()
    assert gn.weight.grad.shape == (4,)
    assert nn.GroupNorm(2, 4, affine=False).weight is None
    rms = nn.RMSNorm([4, 5]).to(backend)
    assert rms.weight.shape == (4, 5) and rms.eps is None
    np.testing.assert_allclose(rms(ndlite.tensor(x, backend=backend)).detach().numpy(),
                               rms_norm_ref(x, (4, 5)), rtol=1e-5, atol=1e-6)
    assert nn.RMSNorm(5, elementwise_affine=False).weight is None
    assert "eps=None" in repr(nn.RMSNorm(5))


# ---- loss modules -------------------------------------------------------------------------------


def _smooth_l1_ref(d, beta):
    a = np.abs(d)
    return np.where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta) if beta else a


def _huber_ref(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def _kl_ref(input, target, log_target):
    if log_target:
        return np.exp(target) * (target - input)
    safe = np.where(target > 0, target, 1.0)
    return np.where(target > 0, target * (np.log(safe) - input), 0.0)


def _reduced(loss, reduction, batch):
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss,
            "batchmean": loss.sum() / batch}[reduction]


LOSS_CASES = [
    (lambda r: nn.SmoothL1Loss(reduction=r, beta=0.5), lambda d, t: _smooth_l1_ref(d - t, 0.5)),
    (lambda r: nn.SmoothL1Loss(reduction=r, beta=0.0), lambda d, t: _smooth_l1_ref(d - t, 0.0)),
    (lambda r: nn.HuberLoss(reduction=r, delta=1.5), lambda d, t: _huber_ref(d - t, 1.5)),
    (lambda r: nn.KLDivLoss(reduction=r), lambda i, t: _kl_ref(i, t, False)),
    (lambda r: nn.KLDivLoss(reduction=r, log_target=True), lambda i, t: _kl_ref(i, t, True)),
]


@pytest.mark.parametrize("k", range(len(LOSS_CASES)))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_modules_match_numpy_and_finite_differences(k, reduction, backend):
    make, ref = LOSS_CASES[k]
    rng = np.random.default_rng(k)
    x = rng.uniform(-2, 2, (3, 4))
    # kl_div's target: probabilities with exact zeros, or log-probabilities
    target = np.where(rng.random((3, 4)) < 0.3, 0.0, rng.random((3, 4)))
    if k == 4:
        target = rng.uniform(-3, 0, (3, 4))
    elif k < 3:
        target = x + rng.choice([-1, 1], (3, 4)) * rng.uniform(0.2, 1.5, (3, 4))
    loss = make(reduction)
    out = loss(ndlite.tensor(x, backend=backend), ndlite.tensor(target, backend=backend))
    np.testing.assert_allclose(out.numpy(), _reduced(ref(x, target), reduction, 3), rtol=1e-10,
                               atol=1e-12)
    gradcheck(lambda t: loss(t[0], t[1]), [x, target], [0] if k >= 3 else [0, 1],
              backend=backend, name=repr(loss))
    gradgradcheck(lambda t: loss(t[0], t[1]), [x, target], [0], backend=backend,
                  name=repr(loss))


def test_kl_div_loss_batchmean_and_settings():
    loss = nn.KLDivLoss(reduction="batchmean", log_target=True)
    x, t = np.log(np.full((4, 5), 0.2)), np.log(np.full((4, 5), 0.2))
    assert loss(ndlite.tensor(x), ndlite.tensor(t)).item() == pytest.approx(0.0, abs=1e-12)
    assert loss.log_target and "batchmean" in repr(loss)
    with pytest.raises(ValueError, match="KLDivLoss"):
        nn.KLDivLoss(reduction="batch")
    with pytest.raises(ValueError, match="SmoothL1Loss"):
        nn.SmoothL1Loss(beta=-1.0)
    with pytest.raises(ValueError, match="HuberLoss"):
        nn.HuberLoss(delta=0.0)
    with pytest.raises(ValueError, match="HuberLoss"):
        nn.HuberLoss(reduction="avg")
    assert nn.HuberLoss(delta=2.0).delta == 2.0 and nn.SmoothL1Loss(beta=0.3).beta == 0.3


# ---- against PyTorch ----------------------------------------------------------------------------


def _torch_args(case, torch):
    return [torch.tensor(a, requires_grad=True) for a in case.inputs]


@pytest.mark.parametrize("name", ["group_norm", "rms_norm"])
@settings(max_examples=60)
@given(data=st.data())
def test_norms_against_torch(name, data):
    torch = pytest.importorskip("torch")
    case = data.draw(_case(name))
    xs = [ndlite.tensor(a, requires_grad=True) for a in case.inputs]
    ts = _torch_args(case, torch)
    out = case.call(OPS[name].function, xs)
    if isinstance(case.params.get("normalized_shape"), int):  # torch takes a list only
        case = dataclasses.replace(case, params=dict(
            case.params, normalized_shape=[case.params["normalized_shape"]]))
    ref = case.call(getattr(torch.nn.functional, name), ts)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    cot = np.random.default_rng(0).standard_normal(ref.shape)
    (out * ndlite.tensor(cot)).sum().backward()
    (ref * torch.tensor(cot)).sum().backward()
    for x, t in zip(xs, ts, strict=True):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_norm_layers_against_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((2, 6, 4)).astype(np.float32)
    for ours, theirs in [(nn.GroupNorm(3, 6), torch.nn.GroupNorm(3, 6)),
                         (nn.GroupNorm(2, 6, affine=False), torch.nn.GroupNorm(2, 6,
                                                                                affine=False)),
                         (nn.RMSNorm(4), torch.nn.RMSNorm(4)),
                         (nn.RMSNorm([6, 4], eps=1e-3), torch.nn.RMSNorm([6, 4], eps=1e-3))]:
        assert [p.shape for p in ours.parameters()] == [tuple(p.shape)
                                                         for p in theirs.parameters()]
        np.testing.assert_allclose(ours(ndlite.tensor(x)).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
def test_loss_modules_against_torch(reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, t = rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4))
    p = np.where(rng.random((3, 4)) < 0.3, 0.0, rng.random((3, 4)))
    pairs = [("KLDivLoss", dict(log_target=False), p), ("KLDivLoss", dict(log_target=True), t)]
    if reduction != "batchmean":
        pairs += [("SmoothL1Loss", dict(beta=0.7), t), ("SmoothL1Loss", {}, t),
                  ("HuberLoss", dict(delta=0.4), t), ("HuberLoss", {}, t)]
    for name, kw, target in pairs:
        ours = getattr(nn, name)(reduction=reduction, **kw)
        theirs = getattr(torch.nn, name)(reduction=reduction, **kw)
        xi, xt = ndlite.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, ref = ours(xi, ndlite.tensor(target)), theirs(xt, torch.tensor(target))
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
        out.sum().backward()
        ref.sum().backward()
        np.testing.assert_allclose(xi.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
