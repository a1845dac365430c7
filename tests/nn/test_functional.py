"""Values of the NN functions against independent NumPy references (nn_reference.py loops and
the formulas of PyTorch's documentation), in float64 on the NumPy backend."""

import math

import nn_reference as ref
import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F

RNG = np.random.default_rng(0)


def t(a):
    return ndlite.tensor(np.asarray(a))


def test_conv2d_with_bias_same_padding_and_unbatched_input():
    x, w, b = RNG.standard_normal((2, 4, 6, 5)), RNG.standard_normal((6, 2, 2, 3)), \
        RNG.standard_normal(6)
    out = F.conv2d(t(x), t(w), t(b), padding="same", groups=2).numpy()
    # 'same' with an even kernel pads (0, 1) rows and (1, 1) columns, as PyTorch does
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (1, 1)))
    expected = ref.conv2d(xp, w, groups=2) + b[None, :, None, None]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    single = F.conv2d(t(x[0]), t(w), t(b), padding="same", groups=2).numpy()
    np.testing.assert_allclose(single, expected[0], rtol=1e-12, atol=1e-12)


def test_max_pool2d_ties_go_to_the_first_maximum():
    x = np.array([[[[1.0, 3.0, 3.0], [3.0, 0.0, 2.0], [3.0, 3.0, 3.0]]]])
    xt = ndlite.tensor(x, requires_grad=True)
    out, idx = F.max_pool2d(xt, 2, stride=1, return_indices=True)
    assert out.tolist() == [[[[3.0, 3.0], [3.0, 3.0]]]]
    assert idx.numpy().tolist() == [[[[1, 1], [3, 7]]]]
    out.sum().backward()
    assert xt.grad.numpy().tolist() == [[[[0.0, 2.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]]


def test_avg_pool2d_count_include_pad_and_ceil_mode():
    x = RNG.standard_normal((1, 2, 5, 5))
    for include in (True, False):
        out = F.avg_pool2d(t(x), 3, 2, 1, ceil_mode=True, count_include_pad=include).numpy()
        np.testing.assert_allclose(out, ref.avg_pool2d(x, (3, 3), (2, 2), (1, 1), True, include),
                                   rtol=1e-12)


def test_adaptive_avg_pool2d_uses_pytorch_windows():
    x = RNG.standard_normal((1, 1, 5, 7))
    out = F.adaptive_avg_pool2d(t(x), (3, 2)).numpy()
    for i in range(3):
        for j in range(2):
            rows = slice(math.floor(i * 5 / 3), math.ceil((i + 1) * 5 / 3))
            cols = slice(math.floor(j * 7 / 2), math.ceil((j + 1) * 7 / 2))
            np.testing.assert_allclose(out[0, 0, i, j], x[0, 0, rows, cols].mean(), rtol=1e-12)


def test_softmax_and_log_softmax_do_not_overflow():
    x = np.array([[1000.0, 1001.0, -1000.0], [0.0, 0.0, 0.0]])
    logp = F.log_softmax(t(x), dim=1).numpy()
    shifted = x - x.max(1, keepdims=True)
    expected = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    np.testing.assert_allclose(logp, expected, rtol=1e-12)
    np.testing.assert_allclose(F.softmax(t(x), dim=1).numpy(), np.exp(expected), rtol=1e-12)


def test_gelu_and_leaky_relu():
    x = np.linspace(-4, 4, 41)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(F.gelu(t(x)).numpy(), exact, atol=2e-7)
    # 0.5 x (1 + tanh(z)) written as x / (1 + exp(-2z)): the same function without the
    # cancellation of 1 + tanh(z) near -1 (which costs 1e-12 relative at x = -4 even in float64)
    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    tanh_form = x / (1 + np.exp(-2 * z))
    np.testing.assert_allclose(F.gelu(t(x), approximate="tanh").numpy(), tanh_form, rtol=1e-14)
    np.testing.assert_allclose(F.leaky_relu(t(x), 0.2).numpy(), np.where(x > 0, x, 0.2 * x))


def test_dropout_is_seeded_scaled_and_off_in_eval():
    x = ndlite.ones(1000, dtype=ndlite.float64)
    ndlite.manual_seed(3)
    a = F.dropout(x, 0.3).numpy()
    ndlite.manual_seed(3)
    b = F.dropout(x, 0.3).numpy()
    assert np.array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, 1 / 0.7}
    assert 0.25 < np.mean(a == 0) < 0.35
    assert F.dropout(x, 0.3, training=False) is x


def _nll_reference(logp, target, weight, ignore_index, reduction):
    n = logp.shape[0]
    w = np.ones(logp.shape[1]) if weight is None else weight
    losses, weights = np.zeros(n), np.zeros(n)
    for i in range(n):
        if target[i] != ignore_index:
            weights[i] = w[target[i]]
            losses[i] = -weights[i] * logp[i, target[i]]
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / weights.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_weights_and_ignore_index(reduction, weighted):
    logp = RNG.standard_normal((6, 4))
    target = np.array([0, 3, 1, 2, 1, 3])
    weight = np.array([0.5, 1.0, 2.0, 1.5]) if weighted else None
    out = F.nll_loss(t(logp), t(target), None if weight is None else t(weight), ignore_index=1,
                     reduction=reduction).numpy()
    np.testing.assert_allclose(out, _nll_reference(logp, target, weight, 1, reduction),
                               rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_label_smoothing_matches_the_documented_formula(reduction, weighted):
    x = RNG.standard_normal((5, 3))
    target = np.array([0, 2, 1, 2, 0])
    weight = np.array([0.5, 2.0, 1.0]) if weighted else np.ones(3)
    eps, c = 0.2, 3
    logp = x - x.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    valid = target != 2
    nll = np.where(valid, -weight[target] * logp[np.arange(5), target], 0.0)
    smooth = np.where(valid, -(logp * weight).sum(1), 0.0)
    if reduction == "mean":
        expected = ((1 - eps) * nll.sum() + eps / c * smooth.sum()) / weight[target][valid].sum()
    elif reduction == "sum":
        expected = (1 - eps) * nll.sum() + eps / c * smooth.sum()
    else:
        expected = (1 - eps) * nll + eps / c * smooth
    out = F.cross_entropy(t(x), t(target), t(weight) if weighted else None, ignore_index=2,
                          reduction=reduction, label_smoothing=eps).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_cross_entropy_with_probabilities_and_spatial_targets():
    x = RNG.standard_normal((2, 3, 4))
    p = RNG.random((2, 3, 4))
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    expected = -(p * logp).sum() / 8
    np.testing.assert_allclose(F.cross_entropy(t(x), t(p)).item(), expected, rtol=1e-12)
    target = np.array([[0, 1, 2, 1], [2, 2, 0, 1]])
    picked = np.take_along_axis(logp, target[:, None], 1)[:, 0]
    np.testing.assert_allclose(F.cross_entropy(t(x), t(target)).item(), -picked.mean(),
                               rtol=1e-12)


def test_regression_and_binary_losses():
    x, y = RNG.random(7) * 0.9 + 0.05, RNG.random(7)
    np.testing.assert_allclose(F.mse_loss(t(x), t(y)).item(), np.mean((x - y) ** 2))
    np.testing.assert_allclose(F.l1_loss(t(x), t(y), reduction="sum").item(),
                               np.abs(x - y).sum())
    bce = -(y * np.log(x) + (1 - y) * np.log(1 - x))
    np.testing.assert_allclose(F.binary_cross_entropy(t(x), t(y), reduction="none").numpy(),
                               bce, rtol=1e-12)
    z = RNG.standard_normal(7) * 30  # large logits must not overflow
    pw = np.full(7, 2.5)
    sig = 1 / (1 + np.exp(-z))
    with np.errstate(divide="ignore"):
        expected = -(pw * y * np.log(sig) + (1 - y) * np.log1p(-sig))
    expected = np.where(np.isfinite(expected), expected,
                        np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z))))
    out = F.binary_cross_entropy_with_logits(t(z), t(y), reduction="none", pos_weight=t(pw))
    assert np.all(np.isfinite(out.numpy()))
    small = np.abs(z) < 20
    np.testing.assert_allclose(out.numpy()[small], expected[small], rtol=1e-9)


def test_batch_norm_training_and_eval():
    x = RNG.standard_normal((8, 3, 2, 2))
    rm, rv = ndlite.zeros(3, dtype=ndlite.float64), ndlite.ones(3, dtype=ndlite.float64)
    out = F.batch_norm(t(x), rm, rv, training=True, momentum=0.1).numpy()
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    expected = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    np.testing.assert_allclose(rm.numpy(), 0.1 * mean, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), rtol=1e-12)
    evaluated = F.batch_norm(t(x), rm, rv, training=False).numpy()
    np.testing.assert_allclose(evaluated, (x - rm.numpy()[:, None, None]) /
                               np.sqrt(rv.numpy()[:, None, None] + 1e-5), rtol=1e-12)
