"""A Sequential's Conv2d (with a bias) and the ReLU after it run as one op (ops/conv.py
Conv2dReLU, one backend call conv2d_bias(..., relu=True)): on every backend its output and its
gradients, first and second order, are the bits of the two layers run one after the other, and
only exact Conv2d + ReLU pairs are fused."""

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite import nn


def _floats(b):
    return [d for d in ("float32", "float64", "float16") if np.dtype(d) in b.dtypes]


def _bits(t):
    a = t.detach().numpy()
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _unfused(model, x):
    """The model's layers one by one: each module's own forward, nothing fused."""
    for m in model:
        x = m(x)
    return x


def _pair(model, x, fused: bool):
    for p in model.parameters():
        p.grad = None
    x = x.detach().requires_grad_()
    out = model(x) if fused else _unfused(model, x)
    (out * out).sum().backward()
    return [out, x.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("padding", [1, "same", 0])
def test_fused_conv_relu_gives_the_bits_of_the_two_layers(backend, padding):
    r = np.random.default_rng(0)
    for dtype in _floats(backend):
        ndlite.manual_seed(0)
        kernel = 2 if padding == "same" else 3  # 'same' with an even kernel pads unevenly
        model = nn.Sequential(nn.Conv2d(3, 4, kernel, padding=padding), nn.ReLU(),
                              nn.Conv2d(4, 2, 1), nn.ReLU(), nn.Flatten()).to(backend)
        model = model.to(getattr(ndlite, dtype))
        x = ndlite.tensor(r.standard_normal((2, 3, 6, 5)), dtype=getattr(ndlite, dtype),
                          backend=backend)
        for got, want in zip(_pair(model, x, True), _pair(model, x, False), strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(_bits(got), _bits(want))


def test_second_order_gradients_match_the_two_layers(backend):
    if np.dtype("float64") not in backend.dtypes:
        pytest.skip(f"no float64 on {backend.name}")
    ndlite.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU()).to(backend)
    model = model.to(ndlite.float64)
    x0 = np.random.default_rng(1).standard_normal((2, 2, 5, 5))
    results = []
    for fused in (True, False):
        x = ndlite.tensor(x0, dtype=ndlite.float64, backend=backend, requires_grad=True)
        out = model(x) if fused else _unfused(model, x)
        (gx,) = ndlite.autograd.grad((out ** 3).sum(), [x], create_graph=True)
        (ggx,) = ndlite.autograd.grad((gx * gx).sum(), [x])
        results.append((gx.detach().numpy(), ggx.numpy()))
    for got, want in zip(*results, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_unbatched_input_and_no_grad(backend):
    ndlite.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()).to(backend)
    x = ndlite.tensor(np.random.default_rng(2).standard_normal((1, 5, 5)),
                      dtype=ndlite.float32, backend=backend)
    with ndlite.no_grad():
        got = model(x)
    want = F.relu(model[0](x))
    assert got.shape == (2, 3, 3)
    np.testing.assert_array_equal(_bits(got), _bits(want))


class Doubled(nn.Conv2d):
    def forward(self, input):
        return super().forward(input) * 2


@pytest.mark.parametrize("layers, fused", [
    (lambda: [nn.Conv2d(1, 2, 3), nn.ReLU()], 1),
    (lambda: [nn.Conv2d(1, 2, 3, bias=False), nn.ReLU()], 0),  # no bias: two ops
    (lambda: [Doubled(1, 2, 3), nn.ReLU()], 0),  # a subclass's own forward runs
    (lambda: [nn.Conv2d(1, 2, 3), nn.Tanh()], 0),
    (lambda: [nn.ReLU(), nn.Conv2d(1, 2, 3)], 0),
    (lambda: [nn.Conv2d(1, 2, 3), nn.ReLU(), nn.ReLU()], 1),
    (lambda: [nn.Conv2d(1, 1, 1), nn.Conv2d(1, 2, 3), nn.ReLU()], 1),
])
def test_only_a_conv2d_with_a_bias_and_then_a_relu_are_fused(backend, layers, fused):
    ndlite.manual_seed(3)
    model = nn.Sequential(*layers()).to(backend)
    x = ndlite.tensor(np.random.default_rng(3).standard_normal((2, 1, 5, 5)),
                      dtype=ndlite.float32, backend=backend)
    calls = []
    saved = backend.__dict__.get("conv2d_bias")
    method = backend.conv2d_bias

    def spy(*args, **kwargs):
        calls.append(args[7] if len(args) > 7 else kwargs.get("relu", False))
        return method(*args, **kwargs)

    backend.conv2d_bias = spy
    try:
        got = model(x)
    finally:
        if saved is None:
            del backend.__dict__["conv2d_bias"]
        else:
            backend.conv2d_bias = saved
    assert sum(bool(c) for c in calls) == fused
    np.testing.assert_array_equal(_bits(got), _bits(_unfused(model, x)))


def test_a_patched_forward_runs_as_patched(backend):
    ndlite.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()).to(backend)
    x = ndlite.tensor(np.random.default_rng(4).standard_normal((2, 1, 5, 5)),
                      dtype=ndlite.float32, backend=backend)
    model[1].forward = lambda input: F.relu(input) * 3  # a module's forward replaced
    np.testing.assert_array_equal(_bits(model(x)), _bits(F.relu(model[0](x)) * 3))
    del model[1].forward
    model[0].forward = lambda input: F.conv2d(input, model[0].weight) * 2  # and the conv's
    np.testing.assert_array_equal(_bits(model(x)), _bits(F.relu(model[0](x))))
    with pytest.raises(ndlite.ShapeError, match="^conv2d: "):  # errors name the layer's op
        nn.Sequential(nn.Conv2d(3, 2, 3), nn.ReLU()).to(backend)(x)
