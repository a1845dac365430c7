"""Cross-checks against PyTorch CPU, run only where torch is installed (it is not in CI):
forward values and input/weight gradients of conv2d, pooling and the losses, and a few
optimizer steps, over hypothesis-drawn parameters."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ndlite
import ndlite.nn.functional as F
from ndlite.ops import OPS
from ndlite.testing import strategy

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(fn_nd, fn_torch, case, grad):
    xs = [ndlite.tensor(a, requires_grad=i in grad) for i, a in enumerate(case.inputs)]
    ts = [torch.tensor(a, requires_grad=i in grad) for i, a in enumerate(case.inputs)]
    out, ref = fn_nd(xs), fn_torch(ts)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-9,
                               atol=1e-10)
    cot = np.random.default_rng(0).standard_normal(ref.shape)
    (out * ndlite.tensor(cot)).sum().backward()
    (ref * torch.tensor(cot)).sum().backward()
    for i in grad:
        np.testing.assert_allclose(xs[i].grad.numpy(), ts[i].grad.numpy(), rtol=1e-9,
                                   atol=1e-10)


@given(data=st.data())
def test_conv2d(data):
    case = data.draw(strategy(OPS["conv2d"].spec, "float64"))
    p = case.params
    grad = list(range(len(case.inputs)))
    _pair(lambda t: F.conv2d(*t, **p), lambda t: TF.conv2d(*t, **p), case, grad)


@given(data=st.data())
def test_max_pool2d(data):
    case = data.draw(strategy(OPS["max_pool2d"].spec, "float64"))
    p = dict(case.params)
    p["stride"] = p["stride"] or None
    _pair(lambda t: F.max_pool2d(t[0], **p), lambda t: TF.max_pool2d(t[0], **p), case, [0])
    x = case.inputs[0]
    if x.ndim == 4:
        _, i_nd = F.max_pool2d(ndlite.tensor(x), return_indices=True, **p)
        _, i_t = TF.max_pool2d(torch.tensor(x), return_indices=True, **p)
        np.testing.assert_array_equal(i_nd.numpy(), i_t.numpy())


@given(data=st.data())
def test_avg_pool2d(data):
    case = data.draw(strategy(OPS["avg_pool2d"].spec, "float64"))
    p = case.params
    _pair(lambda t: F.avg_pool2d(t[0], **p), lambda t: TF.avg_pool2d(t[0], **p), case, [0])


@given(data=st.data())
def test_adaptive_avg_pool2d(data):
    case = data.draw(strategy(OPS["adaptive_avg_pool2d"].spec, "float64"))
    size = case.params["output_size"]
    _pair(lambda t: F.adaptive_avg_pool2d(t[0], size),
          lambda t: TF.adaptive_avg_pool2d(t[0], size), case, [0])


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy"])
@given(data=st.data())
def test_class_losses(name, data):
    case = data.draw(strategy(OPS[name].spec, "float64"))
    _pair(lambda t: case.call(getattr(F, name), t), lambda t: case.call(getattr(TF, name), t),
          case, [0])


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "binary_cross_entropy",
                                  "binary_cross_entropy_with_logits"])
@given(data=st.data())
def test_elementwise_losses(name, data):
    case = data.draw(strategy(OPS[name].spec, "float64"))
    fn_nd, fn_t = getattr(F, name), getattr(TF, name)
    xs = [ndlite.tensor(a) for a in case.inputs]
    ts = [torch.tensor(a) for a in case.inputs]
    np.testing.assert_allclose(case.call(fn_nd, xs).numpy(), case.call(fn_t, ts).numpy(),
                               rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3)),
])
def test_optimizers(name, kwargs):
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal(5)
    p_nd, p_t = ndlite.nn.Parameter(ndlite.tensor(p0)), torch.tensor(p0, requires_grad=True)
    opt_nd = getattr(ndlite.optim, name)([p_nd], **kwargs)
    opt_t = getattr(torch.optim, name)([p_t], **kwargs)
    for _ in range(5):
        g = rng.standard_normal(5)
        p_nd.grad, p_t.grad = ndlite.tensor(g), torch.tensor(g)
        opt_nd.step()
        opt_t.step()
        np.testing.assert_allclose(p_nd.detach().numpy(), p_t.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
