"""The NN layer on every available backend (the fast paths or their fallbacks): a small CNN's
loss, parameter gradients and one optimizer step agree with the NumPy reference, and a model
moves between backends in place."""

import numpy as np
import pytest

import ndlite
from ndlite import nn
from ndlite.nn import functional as F


def _model():
    ndlite.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 6, 3, stride=2, groups=2), nn.GELU(),
                         nn.AvgPool2d(2, ceil_mode=True), nn.Flatten(), nn.Linear(6, 3),
                         nn.LogSoftmax(dim=1))


@pytest.mark.parametrize("name", ["SGD", "RMSprop", "Adam"])
def test_train_step_matches_numpy(backend, name):
    x = np.random.default_rng(0).standard_normal((5, 1, 10, 10)).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0])
    results = []
    for target in ("numpy", backend):
        model = _model().to(target)
        opt = getattr(ndlite.optim, name)(model.parameters(), lr=0.01)
        loss = F.nll_loss(model(ndlite.tensor(x, backend=target)),
                          ndlite.tensor(y, backend=target))
        loss.backward()
        grads = [p.grad.to("numpy").numpy() for p in model.parameters()]
        opt.step()
        params = [p.detach().to("numpy").numpy() for p in model.parameters()]
        results.append((loss.item(), grads, params))
    (l0, g0, p0), (l1, g1, p1) = results
    assert l1 == pytest.approx(l0, rel=1e-5)
    for a, b in zip(g0, g1, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    for a, b in zip(p0, p1, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_max_pool_indices_and_cross_entropy_match_numpy(backend):
    x = np.random.default_rng(1).permutation(2 * 3 * 7 * 7).reshape(2, 3, 7, 7)
    x = x.astype(np.float32)
    for kwargs in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                   dict(kernel_size=2, dilation=2)):
        ref = F.max_pool2d(ndlite.tensor(x), return_indices=True, **kwargs)
        out = F.max_pool2d(ndlite.tensor(x, backend=backend), return_indices=True, **kwargs)
        np.testing.assert_array_equal(out[0].to("numpy").numpy(), ref[0].numpy())
        np.testing.assert_array_equal(out[1].to("numpy").numpy(), ref[1].numpy())
    logits, labels = x.reshape(6, -1)[:, :5], np.array([0, 4, -100, 1, 2, 3])
    ref = F.cross_entropy(ndlite.tensor(logits), ndlite.tensor(labels), label_smoothing=0.1)
    out = F.cross_entropy(ndlite.tensor(logits, backend=backend),
                          ndlite.tensor(labels, backend=backend), label_smoothing=0.1)
    assert out.item() == pytest.approx(ref.item(), rel=1e-5)


def test_module_to_moves_parameters_in_place(backend):
    model = _model()
    params = [id(p) for p in model.parameters()]
    model.to(backend)
    assert [id(p) for p in model.parameters()] == params
    assert all(p.device == backend.name for p in model.parameters())
    model.to("numpy")
    assert all(p.device == "numpy" for p in model.parameters())
