"""nn.RNN, nn.LSTM, nn.GRU and their cells: against an independent float64 NumPy reference,
finite differences, PyTorch's errors and parameter conventions (torch-free, on the backend
NDLITE_BACKEND selects); and against PyTorch itself, values and every gradient, where torch is
installed (the end of this file)."""

import math
import warnings

import numpy as np
import pytest

import ndlite
from ndlite.errors import DTypeError, ShapeError
from ndlite.ops.recurrent import run_layer
from ndlite.testing import gradcheck, gradgradcheck

nn = ndlite.nn
BACKEND = ndlite.current_backend().name


def _close(got, want, tol=1e-12):
    got = got.detach().numpy() if isinstance(got, ndlite.Tensor) else got
    want = want.detach().numpy() if isinstance(want, ndlite.Tensor) else want
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def ref_step(mode, x, state, w_ih, w_hh, b_ih, b_hh):
    """One step of each cell in float64 NumPy, written from PyTorch's documented formulas."""
    gi, gh = x @ w_ih.T + b_ih, state[0] @ w_hh.T + b_hh
    if mode == "lstm":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = _sigmoid(f) * state[1] + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c), c
    if mode == "gru":
        (ir, iz, in_), (hr, hz, hn) = np.split(gi, 3, -1), np.split(gh, 3, -1)
        r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
        n = np.tanh(in_ + r * hn)
        return ((1 - z) * n + z * state[0],)
    pre = gi + gh
    return (np.tanh(pre) if mode == "rnn_tanh" else np.maximum(pre, 0.0),)


def ref_sequence(mode, model, x, states):
    """A seq-first (T, B, I) run of a whole RNN module in NumPy, from its state_dict; states
    is a list (one per state kind) of (layers * D, B, H) arrays. Returns output, finals."""
    p = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}
    dirs = 1 + model.bidirectional
    finals = [[] for _ in states]
    for layer in range(model.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            zero = np.zeros(p["weight_hh" + sfx].shape[0])
            w = [p["weight_ih" + sfx], p["weight_hh" + sfx], p.get("bias_ih" + sfx, zero),
                 p.get("bias_hh" + sfx, zero)]
            state = tuple(s[layer * dirs + d] for s in states)
            out = [None] * len(x)
            for t in (reversed(range(len(x))) if d else range(len(x))):
                state = ref_step(mode, x[t], state, *w)
                out[t] = state[0]
            outs.append(np.stack(out))
            for k, s in enumerate(state):
                finals[k].append(s)
        x = np.concatenate(outs, -1)
    return x, [np.stack(f) for f in finals]


MODULES = {"lstm": lambda **k: nn.LSTM(**k), "gru": lambda **k: nn.GRU(**k),
           "rnn_tanh": lambda **k: nn.RNN(**k), "rnn_relu": lambda **k: nn.RNN(
               nonlinearity="relu", **k)}


@pytest.mark.parametrize("mode", list(MODULES))
@pytest.mark.parametrize("layers,bidirectional,bias", [(1, False, True), (2, True, True),
                                                       (2, False, False)])
def test_module_matches_numpy_reference(mode, layers, bidirectional, bias):
    ndlite.manual_seed(0)
    model = MODULES[mode](input_size=3, hidden_size=4, num_layers=layers, bias=bias,
                          bidirectional=bidirectional, dtype="float64")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 2, 3))
    count = layers * (1 + bidirectional)
    states = [rng.standard_normal((count, 2, 4)) for _ in range(2 if mode == "lstm" else 1)]
    hx = tuple(ndlite.tensor(s) for s in states) if mode == "lstm" else ndlite.tensor(states[0])
    out, final = model(ndlite.tensor(x), hx)
    ref_out, ref_finals = ref_sequence(mode, model, x, states)
    _close(out, ref_out)
    finals = final if mode == "lstm" else (final,)
    for got, want in zip(finals, ref_finals, strict=True):
        _close(got, want)


def test_one_lstm_step_against_numpy():
    """The functional lstm_cell, one step, against the reference formulas in float64."""
    rng = np.random.default_rng(2)
    x, h, c = rng.standard_normal((3, 5)), rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    w_ih, w_hh = rng.standard_normal((16, 5)), rng.standard_normal((16, 4))
    b_ih, b_hh = rng.standard_normal(16), rng.standard_normal(16)
    h1, c1 = ndlite.lstm_cell(*(ndlite.tensor(a) for a in (x,)), (ndlite.tensor(h),
                              ndlite.tensor(c)), *(ndlite.tensor(a) for a in (w_ih, w_hh, b_ih,
                                                                               b_hh)))
    # by hand: gates i, f, g, o, in that order, of the summed projections
    z = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, g, o = _sigmoid(z[:, :4]), _sigmoid(z[:, 4:8]), np.tanh(z[:, 8:12]), _sigmoid(z[:, 12:])
    _close(c1, f * c + i * g, 1e-13)
    _close(h1, o * np.tanh(f * c + i * g), 1e-13)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_gradcheck(mode, reverse):
    """Finite differences of one layer over a sequence: input, states, every weight."""
    rng = np.random.default_rng(3)
    gates, hidden = {"lstm": 4, "gru": 3}[mode], 3
    inputs = [rng.standard_normal((4, 2, 2)), rng.standard_normal((2, hidden))]
    if mode == "lstm":
        inputs.append(rng.standard_normal((2, hidden)))
    inputs += [rng.uniform(-1, 1, (gates * hidden, 2)), rng.uniform(-1, 1, (gates * hidden,
               hidden)), rng.standard_normal(gates * hidden), rng.standard_normal(gates * hidden)]

    def fn(ts):
        state = (ts[1], ts[2]) if mode == "lstm" else ts[1]
        out, final = run_layer(mode, ts[0], state, tuple(ts[-4:]), reverse=reverse)
        return (out,) + (final if mode == "lstm" else (final,))

    gradcheck(fn, inputs, list(range(len(inputs))), backend=BACKEND, name=f"{mode} layer")


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_module_gradcheck(mode):
    """Two bidirectional layers, batch first: gradients of input and initial states."""
    ndlite.manual_seed(4)
    model = MODULES[mode](input_size=2, hidden_size=2, num_layers=2, bidirectional=True,
                          batch_first=True, dtype="float64")
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((2, 3, 2))] + [rng.standard_normal((4, 2, 2))
                                                  for _ in range(2 if mode == "lstm" else 1)]

    def fn(ts):
        out, final = model(ts[0], (ts[1], ts[2]) if mode == "lstm" else ts[1])
        return (out,) + (final if mode == "lstm" else (final,))

    gradcheck(fn, inputs, list(range(len(inputs))), backend=BACKEND, name=f"{mode} module")


def test_lstm_cell_second_order():
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((2, 2)), rng.standard_normal((2, 2)),
              rng.standard_normal((2, 2)), rng.uniform(-1, 1, (8, 2)), rng.uniform(-1, 1, (8, 2))]
    gradgradcheck(lambda t: ndlite.lstm_cell(t[0], (t[1], t[2]), t[3], t[4]), inputs,
                  [0, 1, 2, 3, 4], backend=BACKEND, name="lstm_cell")


def test_parameters_names_shapes_and_initialization():
    ndlite.manual_seed(6)
    model = nn.GRU(5, 20, num_layers=2, bidirectional=True)
    names = list(model.state_dict())
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert names[4:8] == [n + "_reverse" for n in names[:4]]
    assert len(names) == 16 and names[-1] == "bias_hh_l1_reverse"
    assert model.weight_ih_l0.shape == (60, 5) and model.weight_ih_l1.shape == (60, 40)
    assert model.weight_hh_l1_reverse.shape == (60, 20) and model.bias_ih_l1.shape == (60,)
    bound = 1 / math.sqrt(20)
    values = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert values.min() < -0.9 * bound and values.max() > 0.9 * bound
    assert model.flatten_parameters() is None
    assert [len(w) for w in model.all_weights] == [4, 4, 4, 4]
    assert [n for n, _ in nn.LSTM(2, 3, bias=False).named_parameters()] == \
        ["weight_ih_l0", "weight_hh_l0"]
    cell = nn.LSTMCell(3, 7)
    assert [(n, p.shape) for n, p in cell.named_parameters()] == [
        ("weight_ih", (28, 3)), ("weight_hh", (28, 7)), ("bias_ih", (28,)), ("bias_hh", (28,))]


def test_output_shapes():
    x = ndlite.randn(6, 2, 3)
    out, (h, c) = nn.LSTM(3, 4, num_layers=2, bidirectional=True)(x)
    assert (out.shape, h.shape, c.shape) == ((6, 2, 8), (4, 2, 4), (4, 2, 4))
    out, h = nn.GRU(3, 4, batch_first=True)(x)
    assert (out.shape, h.shape) == ((6, 2, 4), (1, 6, 4))
    out, h = nn.RNN(3, 4, 3, bidirectional=True)(ndlite.randn(5, 3))
    assert (out.shape, h.shape) == ((5, 8), (6, 4))
    out, (h, c) = nn.LSTM(3, 4, batch_first=True)(ndlite.randn(5, 3), (ndlite.zeros(1, 4),) * 2)
    assert (out.shape, h.shape, c.shape) == ((5, 4), (1, 4), (1, 4))
    assert nn.GRUCell(3, 4)(ndlite.randn(3)).shape == (4,)
    model = nn.GRU(3, 4, 2).double()  # weights are looked up by name, so conversions hold
    assert model(ndlite.randn(5, 2, 3, dtype="float64"))[0].dtype == np.float64
    assert nn.RNNCell(3, 4, nonlinearity="relu")(ndlite.randn(2, 3)).shape == (2, 4)


def test_dropout_between_layers_in_training_only():
    ndlite.manual_seed(7)
    model = nn.LSTM(3, 4, num_layers=2, dropout=0.5, dtype="float64")
    first = nn.LSTM(3, 4, dtype="float64")
    second = nn.LSTM(4, 4, dtype="float64")
    state = model.state_dict()
    first.load_state_dict({k: v for k, v in state.items() if k.endswith("l0")})
    second.load_state_dict({k.replace("l1", "l0"): v for k, v in state.items()
                            if k.endswith("l1")})
    x = ndlite.randn(5, 2, 3, dtype="float64")
    ndlite.manual_seed(8)
    out, _ = model(x)
    ndlite.manual_seed(8)
    expected, _ = second(nn.functional.dropout(first(x)[0], 0.5))
    _close(out, expected)
    model.eval()
    _close(model(x)[0], second(first(x)[0])[0])


def test_constructor_errors():
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNNCell(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, 2, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size"):
        nn.GRU(3, 0)
    with pytest.raises(TypeError, match="num_layers"):
        nn.LSTM(3, 4, num_layers=1.5)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.LSTM(3, 4, num_layers=2, dropout=0.2)


def test_forward_errors():
    lstm, gru = nn.LSTM(3, 4, num_layers=2), nn.GRU(3, 4)
    with pytest.raises(ShapeError, match=r"LSTM: expected input to be 2-D .* \(1, 2, 3, 3\)"):
        lstm(ndlite.randn(1, 2, 3, 3))
    with pytest.raises(ShapeError, match="input_size: expected 3"):
        gru(ndlite.randn(5, 2, 7))
    with pytest.raises(ShapeError, match=r"expected hidden size \(1, 2, 4\), got \(1, 3, 4\)"):
        gru(ndlite.randn(5, 2, 3), ndlite.zeros(1, 3, 4))
    with pytest.raises(ShapeError, match="hx should be 2-D"):
        gru(ndlite.randn(5, 3), ndlite.zeros(1, 1, 4))
    with pytest.raises(ShapeError, match="hx should be 3-D"):
        gru(ndlite.randn(5, 2, 3), ndlite.zeros(1, 4))
    with pytest.raises(TypeError, match="pair"):
        lstm(ndlite.randn(5, 2, 3), ndlite.zeros(2, 2, 4))
    with pytest.raises(ShapeError, match=r"expected hidden size \(2, 2, 4\)"):
        lstm(ndlite.randn(5, 2, 3), (ndlite.zeros(2, 2, 4), ndlite.zeros(1, 2, 4)))
    with pytest.raises(TypeError, match="PackedSequence"):
        lstm((ndlite.randn(5, 3), [5]))
    with pytest.raises(DTypeError, match="float64"):
        gru(ndlite.randn(5, 2, 3, dtype="float64"))
    with pytest.raises(ShapeError, match="gru_cell: hidden state of shape"):
        nn.GRUCell(3, 4)(ndlite.randn(2, 3), ndlite.zeros(3, 4))
    with pytest.raises(ShapeError, match="lstm_cell: input of shape"):
        nn.LSTMCell(3, 4)(ndlite.randn(2, 5))
    with pytest.raises(ShapeError, match="rnn_tanh_cell: weight_ih"):
        ndlite.rnn_tanh_cell(ndlite.randn(2, 3), ndlite.zeros(2, 4), ndlite.randn(8, 3),
                             ndlite.randn(4, 4))
    with pytest.raises(TypeError, match="pair"):
        ndlite.lstm_cell(ndlite.randn(2, 3), ndlite.zeros(2, 4), ndlite.randn(16, 3),
                         ndlite.randn(16, 4))


def test_gradients_reach_every_parameter_and_input():
    model = nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    x = ndlite.randn(2, 5, 3, requires_grad=True)
    h0 = ndlite.randn(4, 2, 4, requires_grad=True)
    out, h = model(x, h0)
    (out.sum() + h.sum()).backward()
    assert x.grad.shape == x.shape and h0.grad.shape == h0.shape
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name
        assert np.abs(p.grad.detach().numpy()).sum() > 0, name


# ---- against PyTorch (skipped where torch is not installed) ---------------------------------

TORCH_CLASSES = {"lstm": ("LSTM", {}), "gru": ("GRU", {}), "rnn_tanh": ("RNN", {}),
                 "rnn_relu": ("RNN", {"nonlinearity": "relu"})}


def _torch_twin(torch, model, mode, **kwargs):
    """The torch module of the same configuration, holding ndlite model's weights."""
    name, extra = TORCH_CLASSES[mode]
    twin = getattr(torch.nn, name)(**kwargs, **extra, dtype=torch.float64)
    twin.load_state_dict({k: torch.tensor(v.detach().numpy())
                          for k, v in model.state_dict().items()})
    return twin


def _run_both(torch, model, twin, arrays, lstm):
    """Forward both on the same float64 inputs (arrays: x, then h0 [, c0] or nothing), then
    backward one random cotangent per output; returns [(ndlite, torch)] of every output and
    every gradient (inputs, then parameters in state_dict order)."""
    xs = [ndlite.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]

    def call(m, args):
        hx = None if len(args) == 1 else (tuple(args[1:]) if lstm else args[1])
        out, final = m(args[0], hx)
        return [out, *(final if lstm else (final,))]

    outs, refs = call(model, xs), call(twin, ts)
    rng = np.random.default_rng(11)
    cots = [rng.standard_normal(tuple(r.shape)) for r in refs]
    sum((o * ndlite.tensor(c)).sum() for o, c in zip(outs, cots, strict=True)).backward()
    sum((r * torch.tensor(c)).sum() for r, c in zip(refs, cots, strict=True)).backward()
    pairs = [(o, r.detach().numpy()) for o, r in zip(outs, refs, strict=True)]
    pairs += [(x.grad, t.grad.numpy()) for x, t in zip(xs, ts, strict=True)]
    params = dict(twin.named_parameters())
    return pairs + [(p.grad, params[n].grad.numpy()) for n, p in model.named_parameters()]


@pytest.mark.parametrize("mode", list(MODULES))
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("initial", [False, True])
@pytest.mark.parametrize("batched", [True, False])
def test_module_against_torch(mode, layers, bidirectional, batch_first, initial, batched):
    torch = pytest.importorskip("torch")
    config = dict(input_size=3, hidden_size=4, num_layers=layers, bidirectional=bidirectional,
                  batch_first=batch_first, bias=not (layers == 2 and not bidirectional),
                  dropout=0.3 if layers == 2 else 0.0)
    ndlite.manual_seed(12)
    model = MODULES[mode](**config, dtype="float64").eval()  # dropout is off in eval mode
    twin = _torch_twin(torch, model, mode, **config).eval()
    rng = np.random.default_rng(13)
    shape = ((2, 5, 3) if batch_first else (5, 2, 3)) if batched else (5, 3)
    arrays = [rng.standard_normal(shape)]
    if initial:
        count = layers * (1 + bidirectional)
        arrays += [rng.standard_normal((count, 2, 4) if batched else (count, 4))
                   for _ in range(2 if mode == "lstm" else 1)]
    for got, want in _run_both(torch, model, twin, arrays, mode == "lstm"):
        _close(got, want)


@pytest.mark.parametrize("mode", list(MODULES))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("initial", [True, False])
def test_cell_against_torch(mode, bias, batched, initial):
    torch = pytest.importorskip("torch")
    name = {"lstm": "LSTMCell", "gru": "GRUCell"}.get(mode, "RNNCell")
    extra = {"nonlinearity": "relu"} if mode == "rnn_relu" else {}
    ndlite.manual_seed(14)
    cell = getattr(nn, name)(3, 4, bias=bias, dtype="float64", **extra)
    twin = getattr(torch.nn, name)(3, 4, bias=bias, dtype=torch.float64, **extra)
    twin.load_state_dict({k: torch.tensor(v.detach().numpy())
                          for k, v in cell.state_dict().items()})
    rng = np.random.default_rng(15)
    lead = (2,) if batched else ()
    arrays = [rng.standard_normal(lead + (3,))]
    if initial:
        arrays += [rng.standard_normal(lead + (4,)) for _ in range(2 if mode == "lstm" else 1)]
    xs = [ndlite.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    lstm = mode == "lstm"

    def call(m, args):
        hx = None if len(args) == 1 else (tuple(args[1:]) if lstm else args[1])
        out = m(args[0], hx)
        return list(out) if lstm else [out]

    outs, refs = call(cell, xs), call(twin, ts)
    sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()
    sum(r.sum() * (k + 1) for k, r in enumerate(refs)).backward()
    for o, r in zip(outs, refs, strict=True):
        _close(o, r.detach().numpy())
    for x, t in zip(xs, ts, strict=True):
        _close(x.grad, t.grad.numpy())
    params = dict(twin.named_parameters())
    for n, p in cell.named_parameters():
        _close(p.grad, params[n].grad.numpy())


@pytest.mark.parametrize("name", ["ndlite.nn.rnn", "ndlite.ops.recurrent"])
def test_docstring_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
