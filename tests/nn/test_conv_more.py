"""conv1d, conv_transpose1d / conv_transpose2d and their layers (ndlite/ops/conv_more.py,
ndlite/nn/layers_more.py): values and both gradients against direct float64 loops written from
the definitions, float64 finite differences (first and second order) on every backend, and
PyTorch where it is installed, over hypothesis-drawn geometry (stride, padding, 'same' and
'valid', dilation, groups, output_padding, unbatched inputs)."""

import doctest
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ndlite
import ndlite.nn.functional as F
from ndlite import nn
from ndlite.errors import DTypeError, ShapeError
from ndlite.nn import layers_more
from ndlite.ops import OPS, conv_more
from ndlite.testing import gradcheck, gradgradcheck, strategy

# ---- direct references: one multiply-add per (input position, kernel tap) -----------------------


def _tuple(v, dims):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims


def conv_transpose_ref(x, w, grad, stride, padding, output_padding, groups, dilation):
    """(y, grad_x, grad_w) of a transposed convolution over any number of spatial dims, by
    scattering each input element through each kernel tap: y[o] += x[i] w[k] where
    o = i * stride - padding + k * dilation lands inside the output."""
    dims = x.ndim - 2
    s, p, q, d = (_tuple(v, dims) for v in (stride, padding, output_padding, dilation))
    n, c_in = x.shape[:2]
    cg_in, cg_out, kernel = c_in // groups, w.shape[1], w.shape[2:]
    size = tuple((x.shape[2 + a] - 1) * s[a] - 2 * p[a] + d[a] * (kernel[a] - 1) + q[a] + 1
                 for a in range(dims))
    y = np.zeros((n, cg_out * groups) + size)
    gx, gw = np.zeros_like(x), np.zeros_like(w)
    for ci in range(c_in):
        g = ci // cg_in
        for oc in range(cg_out):
            co = g * cg_out + oc
            for i in itertools.product(*(range(m) for m in x.shape[2:])):
                for k in itertools.product(*(range(m) for m in kernel)):
                    o = tuple(i[a] * s[a] - p[a] + k[a] * d[a] for a in range(dims))
                    if all(0 <= o[a] < size[a] for a in range(dims)):
                        at_x, at_y = (slice(None), ci) + i, (slice(None), co) + o
                        y[at_y] += x[at_x] * w[(ci, oc) + k]
                        if grad is not None:
                            gx[at_x] += grad[at_y] * w[(ci, oc) + k]
                            gw[(ci, oc) + k] += np.sum(grad[at_y] * x[at_x])
    return y, gx, gw


def conv1d_ref(x, w, stride, padding, dilation, groups):
    """conv1d by its definition: out[n, o, t] = sum_{c, k} x_pad[n, c, t * s + k * d] w[o, c, k]."""
    (stride,), (dilation,) = _tuple(stride, 1), _tuple(dilation, 1)
    o_ch, cg, k = w.shape
    if padding == "same":
        total = dilation * (k - 1)
        left, right = total // 2, total - total // 2
    else:
        left = right = 0 if padding == "valid" else _tuple(padding, 1)[0]
    xp = np.pad(x, ((0, 0), (0, 0), (left, right)))
    length = (xp.shape[2] - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], o_ch, length))
    for oc in range(o_ch):
        g = oc // (o_ch // groups)
        for t in range(length):
            taps = t * stride + dilation * np.arange(k)
            out[:, oc, t] = np.sum(xp[:, g * cg:(g + 1) * cg][:, :, taps] * w[oc], axis=(1, 2))
    return out


def _batched(a):
    return a if a is None else a[None]


def _float64_on(backend):
    return np.dtype("float64") in ndlite.device.get_backend(backend).dtypes


# ---- torch-free: direct loops and finite differences --------------------------------------------


@settings(max_examples=30)
@given(data=st.data())
def test_conv_transpose2d_matches_the_direct_loop(data, backend):
    dtype = "float64" if _float64_on(backend) else "float32"
    case = data.draw(strategy(OPS["conv_transpose2d"].spec, "float64"))
    p = case.params
    x, w = case.inputs[0], case.inputs[1]
    bias = case.inputs[2] if len(case.inputs) > 2 else None
    unbatched = x.ndim == 3
    x4 = x[None] if unbatched else x
    y_ref, _, _ = conv_transpose_ref(x4, w, None, **p)
    if bias is not None:
        y_ref = y_ref + bias.reshape(1, -1, 1, 1)
    grad = np.random.default_rng(0).standard_normal(y_ref.shape)
    _, gx_ref, gw_ref = conv_transpose_ref(x4, w, grad, **p)
    ts = [ndlite.tensor(a.astype(dtype), backend=backend, requires_grad=True)
          for a in case.inputs]
    out = F.conv_transpose2d(*ts, **p)
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == "float64" else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.detach().numpy(), y_ref[0] if unbatched else y_ref, **tol)
    out.backward(ndlite.tensor((grad[0] if unbatched else grad).astype(dtype), backend=backend))
    np.testing.assert_allclose(ts[0].grad.numpy(), gx_ref[0] if unbatched else gx_ref, **tol)
    np.testing.assert_allclose(ts[1].grad.numpy(), gw_ref, **tol)
    if bias is not None:
        np.testing.assert_allclose(ts[2].grad.numpy(), grad.sum(axis=(0, 2, 3)), **tol)


@settings(max_examples=30)
@given(data=st.data())
def test_conv_transpose1d_matches_the_direct_loop(data, backend):
    case = data.draw(strategy(OPS["conv_transpose1d"].spec, "float64"))
    p = case.params
    x, w = case.inputs[0], case.inputs[1]
    x3 = x[None] if x.ndim == 2 else x
    y_ref, _, _ = conv_transpose_ref(x3, w, None, **p)
    grad = np.random.default_rng(1).standard_normal(y_ref.shape)
    _, gx_ref, gw_ref = conv_transpose_ref(x3, w, grad, **p)
    xt, wt = (ndlite.tensor(a, backend=backend, requires_grad=True) for a in (x3, w))
    out = F.conv_transpose1d(xt, wt, **p)
    np.testing.assert_allclose(out.detach().numpy(), y_ref, rtol=1e-10, atol=1e-10)
    out.backward(ndlite.tensor(grad, backend=backend))
    np.testing.assert_allclose(xt.grad.numpy(), gx_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(wt.grad.numpy(), gw_ref, rtol=1e-10, atol=1e-10)


@settings(max_examples=30)
@given(data=st.data())
def test_conv1d_matches_the_direct_loop(data, backend):
    case = data.draw(strategy(OPS["conv1d"].spec, "float64"))
    x, w = case.inputs[0], case.inputs[1]
    bias = case.inputs[2] if len(case.inputs) > 2 else None
    ref = conv1d_ref(x if x.ndim == 3 else x[None], w, **case.params)
    if bias is not None:
        ref = ref + bias.reshape(1, -1, 1)
    out = F.conv1d(*(ndlite.tensor(a, backend=backend) for a in case.inputs), **case.params)
    np.testing.assert_allclose(out.numpy(), ref if x.ndim == 3 else ref[0], rtol=1e-10,
                               atol=1e-10)


@pytest.mark.parametrize("name", ["conv1d", "conv_transpose1d", "conv_transpose2d"])
@settings(max_examples=15)
@given(data=st.data())
def test_first_and_second_order_finite_differences(name, data, backend):
    spec = OPS[name].spec
    case = data.draw(strategy(spec, "float64"))
    fn = OPS[name].function
    grad = list(range(len(case.inputs)))
    gradcheck(lambda t: fn(*t, **case.params), case.inputs, grad, backend=backend, name=name)
    gradgradcheck(lambda t: fn(*t, **case.params), case.inputs, grad, backend=backend,
                  name=name)


def test_conv_transpose2d_is_the_input_gradient_of_conv2d():
    """<conv2d(y, w), x> = <y, conv_transpose2d(x, w)> for the same geometry."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 2, 3, 2))
    y = rng.standard_normal((2, 4, 7, 8))  # conv2d's input, conv_transpose2d's output
    geometry = dict(stride=(2, 3), padding=(1, 0), dilation=(1, 2), groups=2)
    conv = F.conv2d(ndlite.tensor(y), ndlite.tensor(w), **geometry).numpy()
    x = rng.standard_normal(conv.shape)
    # 7 = (4 - 1) * 2 - 2 + 2 + 1 (+ 0), 8 = (conv.shape[3] - 1) * 3 + 2 + 1 + output_padding
    back = F.conv_transpose2d(ndlite.tensor(x), ndlite.tensor(w), output_padding=(0, 2),
                              **geometry).numpy()
    assert back.shape == y.shape
    assert np.sum(conv * x) == pytest.approx(np.sum(y * back), rel=1e-12)


def test_output_padding_at_least_the_stride_below_the_dilation():
    """PyTorch allows output_padding < max(stride, dilation): with stride 1 and dilation 3,
    conv2d over the output has a window more than the input has rows (the input is padded
    with zeros to it), and the last row, beyond the taps without output_padding, receives
    taps, as the direct loop confirms."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((2, 1, 3, 3))
    p = dict(stride=1, padding=2, output_padding=1, groups=1, dilation=3)
    y_ref, _, _ = conv_transpose_ref(x, w, None, **p)
    out = F.conv_transpose2d(ndlite.tensor(x), ndlite.tensor(w), **p)
    np.testing.assert_allclose(out.numpy(), y_ref, rtol=1e-12, atol=1e-12)
    assert np.abs(y_ref[..., -1, :]).max() > 0
    gradcheck(lambda t: F.conv_transpose2d(*t, **p), [x, w], [0, 1])


def test_empty_batch_gives_an_empty_output_and_zero_gradients():
    w = ndlite.randn(3, 2, 3, 3, dtype="float64", requires_grad=True)
    out = F.conv_transpose2d(ndlite.zeros(0, 3, 4, 4, dtype="float64"), w, stride=2)
    assert out.shape == (0, 2, 9, 9)
    out.sum().backward()
    assert np.all(w.grad.numpy() == 0)


def test_bad_arguments_raise_typed_errors_naming_the_op():
    x, w = ndlite.ones(1, 4, 5, 5), ndlite.ones(4, 2, 3, 3)
    with pytest.raises(ShapeError, match="conv_transpose2d.*channels"):
        F.conv_transpose2d(ndlite.ones(1, 3, 5, 5), w)
    with pytest.raises(ShapeError, match="divisible by groups"):
        F.conv_transpose2d(x, w, groups=3)
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ShapeError, match="bias"):
        F.conv_transpose2d(x, w, ndlite.ones(3))
    with pytest.raises(ShapeError, match="not positive"):
        F.conv_transpose2d(ndlite.ones(1, 4, 1, 1), ndlite.ones(4, 2, 1, 1), padding=1)
    with pytest.raises(DTypeError, match="conv_transpose2d"):
        F.conv_transpose2d(x, w.double())
    with pytest.raises(ShapeError, match="conv1d.*channels"):
        F.conv1d(ndlite.ones(1, 3, 5), ndlite.ones(2, 2, 3))
    with pytest.raises(ValueError, match="conv1d: padding='same'"):
        F.conv1d(ndlite.ones(1, 2, 5), ndlite.ones(2, 2, 3), stride=2, padding="same")
    with pytest.raises(ShapeError, match="conv1d: the kernel"):
        F.conv1d(ndlite.ones(1, 2, 2), ndlite.ones(2, 2, 3))
    with pytest.raises(ShapeError, match="conv1d: weight must be 3-D"):
        F.conv1d(ndlite.ones(1, 2, 5), ndlite.ones(2, 2, 1, 3))
    with pytest.raises(ShapeError, match="conv_transpose1d: expected a 2-D"):
        F.conv_transpose1d(ndlite.ones(1, 2, 5, 5), ndlite.ones(2, 2, 3))
    with pytest.raises(ShapeError, match="conv_transpose1d: input of shape"):
        F.conv_transpose1d(ndlite.ones(1, 3, 5), ndlite.ones(2, 2, 3))
    with pytest.raises(ValueError, match="conv_transpose1d: output_padding"):
        F.conv_transpose1d(ndlite.ones(1, 2, 5), ndlite.ones(2, 2, 3), output_padding=1)


def test_docstring_examples_run():
    for module in (conv_more, layers_more):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# ---- layers -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [2, "same", "valid"])
def test_conv1d_layer_padding_modes(mode, padding, backend):
    ndlite.manual_seed(0)
    layer = nn.Conv1d(4, 6, 4, padding=padding, dilation=1, groups=2, padding_mode=mode,
                      dtype="float64").to(backend)
    x = np.random.default_rng(5).standard_normal((2, 4, 7))
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    if padding == "valid":
        widths = (0, 0)
    else:
        widths = (1, 2) if padding == "same" else (2, 2)
    np_mode = {"zeros": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    ref = conv1d_ref(np.pad(x, ((0, 0), (0, 0), widths), mode=np_mode), w, 1, 0, 1, 2)
    out = layer(ndlite.tensor(x, backend=backend))
    np.testing.assert_allclose(out.detach().numpy(), ref + b.reshape(1, -1, 1), rtol=1e-10,
                               atol=1e-10)
    out.sum().backward()
    assert layer.weight.grad.shape == (6, 2, 4)


def test_layer_shapes_and_pytorch_initialization_bounds():
    ndlite.manual_seed(0)
    layer = nn.ConvTranspose2d(4, 6, (3, 2), stride=2, groups=2)
    assert layer.weight.shape == (4, 3, 3, 2) and layer.bias.shape == (6,)
    bound = 1 / np.sqrt(3 * 3 * 2)  # fan_in of (in, out / groups, kh, kw) is dim 1 * kernel
    assert np.abs(layer.bias.detach().numpy()).max() <= bound
    assert np.abs(layer.weight.detach().numpy()).max() <= bound  # kaiming_uniform(a=sqrt(5))
    assert nn.ConvTranspose1d(2, 3, 5, bias=False).weight.shape == (2, 3, 5)
    assert nn.Conv1d(4, 2, 3, groups=2).weight.shape == (2, 2, 3)
    assert "output_padding=(1, 1)" in repr(nn.ConvTranspose2d(1, 1, 3, stride=2,
                                                               output_padding=1))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.ConvTranspose2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="only 'zeros'"):
        nn.ConvTranspose1d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv1d(2, 2, 3, padding_mode="mirror")


def test_conv_transpose_output_size_picks_output_padding():
    layer = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    x = ndlite.randn(1, 2, 4, 4)
    assert layer(x).shape == (1, 3, 7, 7)
    assert layer(x, output_size=(8, 7)).shape == (1, 3, 8, 7)
    assert layer(x, output_size=[1, 3, 8, 8]).shape == (1, 3, 8, 8)
    with pytest.raises(ValueError, match="output size"):
        layer(x, output_size=(9, 9))
    one = nn.ConvTranspose1d(2, 3, 3, stride=3)
    assert one(ndlite.randn(2, 4), output_size=[12]).shape == (3, 12)


def test_transposed_conv_autoencoder_trains():
    """A Conv1d encoder and a ConvTranspose1d decoder learn to reproduce their input."""
    ndlite.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 4, stride=2, padding=1), nn.Tanh(),
                          nn.ConvTranspose1d(4, 1, 4, stride=2, padding=1))
    x = ndlite.tensor(np.sin(np.linspace(0, 6, 16))[None, None].repeat(4, 0), dtype="float32")
    opt = ndlite.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = F.mse_loss(model(x), x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


# ---- against PyTorch ----------------------------------------------------------------------------


def _torch_pair(name, fn_torch, case, params):
    torch = pytest.importorskip("torch")
    fn = OPS[name].function
    xs = [ndlite.tensor(a, requires_grad=True) for a in case.inputs]
    ts = [torch.tensor(a, requires_grad=True) for a in case.inputs]
    out, ref = fn(*xs, **case.params), fn_torch(*ts, **params)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10,
                               atol=1e-10)
    cot = np.random.default_rng(0).standard_normal(ref.shape)
    (out * ndlite.tensor(cot)).sum().backward()
    (ref * torch.tensor(cot)).sum().backward()
    for x, t in zip(xs, ts, strict=True):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["conv1d", "conv_transpose1d", "conv_transpose2d"])
@settings(max_examples=60)
@given(data=st.data())
def test_against_torch(name, data):
    torch = pytest.importorskip("torch")
    case = data.draw(strategy(OPS[name].spec, "float64"))
    _torch_pair(name, getattr(torch.nn.functional, name), case, case.params)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv1d_layer_against_torch(mode):
    torch = pytest.importorskip("torch")
    for padding, stride, dilation in [(1, 2, 1), ("same", 1, 2), ("valid", 3, 1), (3, 1, 2)]:
        ours = nn.Conv1d(4, 6, 3, stride, padding, dilation, groups=2, padding_mode=mode,
                         dtype="float64")
        theirs = torch.nn.Conv1d(4, 6, 3, stride, padding, dilation, groups=2,
                                 padding_mode=mode, dtype=torch.float64)
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
            theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))
        x = np.random.default_rng(6).standard_normal((2, 4, 9))
        np.testing.assert_allclose(ours(ndlite.tensor(x)).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10,
                                   atol=1e-10)


def test_conv_transpose2d_layer_output_size_against_torch():
    torch = pytest.importorskip("torch")
    ours = nn.ConvTranspose2d(4, 2, (3, 2), stride=(3, 2), padding=(1, 0), dilation=(2, 1),
                              groups=2, dtype="float64")
    theirs = torch.nn.ConvTranspose2d(4, 2, (3, 2), stride=(3, 2), padding=(1, 0),
                                      dilation=(2, 1), groups=2, dtype=torch.float64)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))
    x = np.random.default_rng(7).standard_normal((2, 4, 3, 5))
    for size in [None, (10, 10), (11, 11), (9, 11)]:
        np.testing.assert_allclose(
            ours(ndlite.tensor(x), output_size=size).detach().numpy(),
            theirs(torch.tensor(x), output_size=size).detach().numpy(), rtol=1e-10, atol=1e-10)
    for size in [(12, 11), (8, 10)]:  # out of range for both
        with pytest.raises(ValueError):
            ours(ndlite.tensor(x), output_size=size)
        with pytest.raises(ValueError):
            theirs(torch.tensor(x), output_size=size)
