"""Recurrent cells (PyTorch's torch.rnn_tanh_cell, rnn_relu_cell, lstm_cell, gru_cell) and the
loop that runs one layer of them over a sequence, composed from linear, sigmoid, tanh, relu
and chunk/stack, so their gradients (second order too) come from those ops.

A cell step is split in two: the input projection x W_ih^T + b_ih, which the sequence loop
computes for every timestep at once with one matmul, and the step proper, which adds the
hidden projection h W_hh^T + b_hh and applies the gates (LSTM: i, f, g, o; GRU: r, z, n with
n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn)), as PyTorch's)."""

from __future__ import annotations

from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .autocast import autocast_op
from .join import chunk, narrow, stack
from .linalg import linear
from .registry import TRANSCENDENTAL, Spec, declare
from .samples import Sampler
from .unary import relu, sigmoid, tanh

RNN_CELL = Sampler("rnn_cell", "input (batched or not), hidden state(s), weights and optional "
                               "biases of one recurrent cell step; params name the cell")

#: rows of W_ih per hidden unit, by cell
GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}


# ---- one step, given the input projection -------------------------------------------------


def rnn_step(projected: Tensor, h: Tensor, w_hh: Tensor, b_hh, nonlinearity: str) -> Tensor:
    """h' = act(projected + h W_hh^T + b_hh), act tanh or relu."""
    pre = projected + linear(h, w_hh, b_hh)
    return tanh(pre) if nonlinearity == "tanh" else relu(pre)


def lstm_step(projected: Tensor, state: tuple, w_hh: Tensor, b_hh) -> tuple:
    """(h', c') from the gates i, f, g, o: c' = f c + i g, h' = o tanh(c')."""
    h, c = state
    i, f, g, o = chunk(projected + linear(h, w_hh, b_hh), 4, -1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    return sigmoid(o) * tanh(c), c


def gru_step(projected: Tensor, h: Tensor, w_hh: Tensor, b_hh) -> Tensor:
    """h' = (1 - z) n + z h, with r, z the sigmoid gates and n = tanh(x_n + r (h W_hn^T +
    b_hn)): the reset gate multiplies the hidden projection including its bias."""
    x_r, x_z, x_n = chunk(projected, 3, -1)
    h_r, h_z, h_n = chunk(linear(h, w_hh, b_hh), 3, -1)
    r = sigmoid(x_r + h_r)
    z = sigmoid(x_z + h_z)
    n = tanh(x_n + r * h_n)
    return n + z * (h - n)


def step(mode: str, projected: Tensor, state, w_hh: Tensor, b_hh):
    """One step of the cell `mode` ("rnn_tanh", "rnn_relu", "lstm", "gru")."""
    if mode == "lstm":
        return lstm_step(projected, state, w_hh, b_hh)
    if mode == "gru":
        return gru_step(projected, state, w_hh, b_hh)
    return rnn_step(projected, state, w_hh, b_hh, mode[4:])


# ---- the public cells ---------------------------------------------------------------------


def check_cell(op: str, input: Tensor, hidden: tuple, w_ih: Tensor, w_hh: Tensor, b_ih,
               b_hh) -> None:
    """Raise ShapeError/DTypeError naming `op` and the shapes when the operands do not fit."""
    tensors = [input, *hidden, w_ih, w_hh] + [b for b in (b_ih, b_hh) if b is not None]
    if any(not isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"{op}: expected tensors, got "
                        f"{[type(t).__name__ for t in tensors]}")
    if any(t.dtype != input.dtype for t in tensors) or not is_floating(input.dtype):
        raise DTypeError(f"{op}: input, hidden state, weights and biases must share one "
                         f"floating dtype, got {[str(t.dtype) for t in tensors]}")
    gates = GATES[op.replace("_cell", "")]
    rows, size = w_hh.shape[0] if w_hh.ndim == 2 else -1, w_hh.shape[-1]
    if w_hh.ndim != 2 or rows != gates * size or w_ih.ndim != 2 or w_ih.shape[0] != rows:
        raise ShapeError(f"{op}: weight_ih {w_ih.shape} and weight_hh {w_hh.shape} must be "
                         f"({gates} * hidden_size, input_size) and ({gates} * hidden_size, "
                         f"hidden_size)")
    for name, b in (("bias_ih", b_ih), ("bias_hh", b_hh)):
        if b is not None and b.shape != (rows,):
            raise ShapeError(f"{op}: {name} must have shape ({rows},), got {b.shape}")
    if input.ndim not in (1, 2) or input.shape[-1] != w_ih.shape[1]:
        raise ShapeError(f"{op}: input of shape {input.shape} must be (batch, {w_ih.shape[1]}) "
                         f"or ({w_ih.shape[1]},) for weight_ih of shape {w_ih.shape}")
    for h in hidden:
        if h.shape != input.shape[:-1] + (size,):
            raise ShapeError(f"{op}: hidden state of shape {h.shape} does not fit input of "
                             f"shape {input.shape}: expected {input.shape[:-1] + (size,)}")


def _cell(mode: str, input: Tensor, hx, w_ih, w_hh, b_ih, b_hh):
    hidden = tuple(hx) if mode == "lstm" else (hx,)
    check_cell(f"{mode}_cell", input, hidden, w_ih, w_hh, b_ih, b_hh)
    state = hidden if mode == "lstm" else hx
    return step(mode, linear(input, w_ih, b_ih), state, w_hh, b_hh)


@autocast_op("rnn_tanh_cell")
def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None,
                  b_hh=None) -> Tensor:
    """One Elman RNN step: tanh(input W_ih^T + b_ih + hx W_hh^T + b_hh).

    >>> import ndlite
    >>> w = ndlite.zeros(2, 3)
    >>> ndlite.rnn_tanh_cell(ndlite.ones(1, 3), ndlite.zeros(1, 2), w, ndlite.zeros(2, 2)).shape
    (1, 2)
    """
    return _cell("rnn_tanh", input, hx, w_ih, w_hh, b_ih, b_hh)


@autocast_op("rnn_relu_cell")
def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None,
                  b_hh=None) -> Tensor:
    """One Elman RNN step with relu: relu(input W_ih^T + b_ih + hx W_hh^T + b_hh)."""
    return _cell("rnn_relu", input, hx, w_ih, w_hh, b_ih, b_hh)


@autocast_op("lstm_cell")
def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> tuple:
    """One LSTM step: hx = (h, c), weights stacked in the gate order i, f, g, o; returns
    (h', c')."""
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError(f"lstm_cell: hx must be a pair (h, c), got {type(hx).__name__}")
    return _cell("lstm", input, hx, w_ih, w_hh, b_ih, b_hh)


@autocast_op("gru_cell")
def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None,
             b_hh=None) -> Tensor:
    """One GRU step, weights stacked in the gate order r, z, n (PyTorch's formulas)."""
    return _cell("gru", input, hx, w_ih, w_hh, b_ih, b_hh)


# ---- a layer over a sequence --------------------------------------------------------------


def timesteps(x: Tensor) -> list:
    """x[0], x[1], ... as views, split by halves: the backward of each slice writes a gradient
    of its parent's size, so halving costs O(T log T) against O(T^2) for T direct slices."""
    if x.shape[0] == 1:
        return [x.squeeze(0)]
    half = x.shape[0] // 2
    return (timesteps(narrow(x, 0, 0, half)) +
            timesteps(narrow(x, 0, half, x.shape[0] - half)))


def run_layer(mode: str, x: Tensor, state, weights: tuple, reverse: bool = False) -> tuple:
    """One layer in one direction over x (T, B, input_size), from `state` (h, or (h, c) for
    the LSTM); weights (w_ih, w_hh, b_ih, b_hh), the biases possibly None. Returns the
    outputs (T, B, hidden_size) and the final state. The input projection of every timestep
    is one matmul; each step adds the hidden one."""
    w_ih, w_hh, b_ih, b_hh = weights
    length, batch = x.shape[0], x.shape[1]
    # one 2-D product (a single GEMM, forward and backward) for every timestep's projection
    projected = linear(x.reshape(length * batch, x.shape[2]), w_ih, b_ih)
    steps = timesteps(projected.reshape(length, batch, w_ih.shape[0]))
    outputs = [None] * len(steps)
    for t in (range(len(steps) - 1, -1, -1) if reverse else range(len(steps))):
        state = step(mode, steps[t], state, w_hh, b_hh)
        outputs[t] = state[0] if mode == "lstm" else state
    return stack(outputs, 0), state


# ---- the conformance kit's view (the sampler, testing/samplers_rnn.py, says how to call) ----


for _name, _fn in (("rnn_tanh_cell", rnn_tanh_cell), ("rnn_relu_cell", rnn_relu_cell),
                   ("lstm_cell", lstm_cell), ("gru_cell", gru_cell)):
    declare(_name, Spec(RNN_CELL, tol=TRANSCENDENTAL, second_order=True,
                        params={"mode": _name[:-len("_cell")]}), _fn)
