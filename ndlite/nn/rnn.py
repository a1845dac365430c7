"""Recurrent layers with PyTorch's names, signatures, parameter names and initialization: RNN,
LSTM, GRU over whole sequences (layers, both directions, dropout between layers, batch_first,
unbatched input) and the single-step RNNCell, LSTMCell, GRUCell, over the cells and the
sequence loop of ndlite/ops/recurrent.py. PackedSequence and LSTM's proj_size are refused."""

from __future__ import annotations

import math
import numbers
import warnings

from ..creation import empty, zeros
from ..errors import DTypeError, ShapeError
from ..ops.activation import dropout as dropout_fn
from ..ops.join import cat, stack
from ..ops.recurrent import gru_cell, lstm_cell, rnn_relu_cell, rnn_tanh_cell, run_layer
from ..tensor import Tensor
from .init import uniform_
from .module import Module, Parameter

#: PyTorch's mode names -> (the cell in ops/recurrent.py, gates per hidden unit)
MODES = {"RNN_TANH": ("rnn_tanh", 1), "RNN_RELU": ("rnn_relu", 1), "LSTM": ("lstm", 4),
         "GRU": ("gru", 3)}


def _positive_int(name: str, value, what: str) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name}: {what} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name}: {what} must be greater than zero, got {value}")


def _nonlinearity(name: str, nonlinearity) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{name}: unknown nonlinearity {nonlinearity!r}; select from "
                         f"'tanh' or 'relu'")
    return nonlinearity


class RNNBase(Module):
    """The multi-layer recurrent network of one cell kind `mode` ("RNN_TANH", "RNN_RELU",
    "LSTM", "GRU"); its parameters are weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
    bias_hh_l{k} (with the suffix _reverse for the backward direction), all drawn from
    U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None,
                 backend=None):
        super().__init__()
        name = type(self).__name__
        if mode not in MODES:
            raise ValueError(f"{name}: unknown mode {mode!r}; expected one of {list(MODES)}")
        _positive_int(name, input_size, "input_size")
        _positive_int(name, hidden_size, "hidden_size")
        _positive_int(name, num_layers, "num_layers")
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or \
                not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing "
                             f"the probability of an element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout option adds dropout after all but last recurrent "
                          f"layer, so non-zero dropout expects num_layers greater than 1, but "
                          f"got dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        if proj_size:
            raise NotImplementedError(
                f"{name}: proj_size={proj_size} (LSTM with projections) is not supported by "
                f"ndlite; leave proj_size=0")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        self._make_parameters(MODES[mode][1] * hidden_size, dtype,
                              backend if backend is not None else device)
        self.reset_parameters()

    def _make_parameters(self, rows: int, dtype, where) -> None:
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(self.num_layers):
            for suffix in ("", "_reverse")[:1 + self.bidirectional]:
                size = self.input_size if layer == 0 else \
                    self.hidden_size * (1 + self.bidirectional)
                shapes = {"weight_ih": (rows, size), "weight_hh": (rows, self.hidden_size)}
                if self.bias:
                    shapes.update(bias_ih=(rows,), bias_hh=(rows,))
                names = [f"{kind}_l{layer}{suffix}" for kind in shapes]
                for full, shape in zip(names, shapes.values(), strict=True):
                    setattr(self, full, Parameter(empty(shape, dtype=dtype, backend=where)))
                self._flat_weights_names += names
                self._all_weights.append(names)

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """PyTorch compacts cuDNN's weight buffer here; ndlite's weights need nothing (as
        PyTorch's on the CPU)."""

    @property
    def all_weights(self) -> list:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name) for name in self._flat_weights_names]

    def _weights(self, layer: int, direction: int) -> tuple:
        names = self._all_weights[layer * (1 + self.bidirectional) + direction]
        tensors = [getattr(self, n) for n in names]
        return tuple(tensors) if self.bias else (tensors[0], tensors[1], None, None)

    def _check_input(self, input) -> bool:
        """Raise on input PyTorch would refuse; True when it is batched (3-D)."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected a Tensor input, got {type(input).__name__} "
                            f"(PackedSequence is not supported by ndlite: pad the sequences "
                            f"and pass a tensor)")
        if input.ndim not in (2, 3):
            raise ShapeError(f"{name}: expected input to be 2-D (unbatched) or 3-D, got shape "
                             f"{input.shape}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input.size(-1) must be equal to input_size: expected "
                             f"{self.input_size}, got input of shape {input.shape}")
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:
            raise DTypeError(f"{name}: input dtype {input.dtype} does not match the weights' "
                             f"{weight.dtype}")
        if 0 in input.shape:
            raise ShapeError(f"{name}: input of shape {input.shape} has an empty dim")
        return input.ndim == 3

    def _initial_states(self, hx, batched: bool, batch: int, like: Tensor) -> list:
        """The initial state of every layer and direction: h (B, H), or (h, c) for the LSTM."""
        name = type(self).__name__
        lstm = self.mode == "LSTM"
        count = self.num_layers * (1 + self.bidirectional)
        expected = (count, batch, self.hidden_size)
        if hx is None:
            h = zeros(expected[1:], dtype=like.dtype, backend=like._backend)
            return [(h, h) if lstm else h] * count
        if lstm and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"{name}: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
        parts = list(hx) if lstm else [hx]
        for part in parts:
            if not isinstance(part, Tensor):
                raise TypeError(f"{name}: hx must hold tensors, got {type(part).__name__}")
            if part.ndim != (3 if batched else 2):
                raise ShapeError(f"{name}: for {'batched 3-D' if batched else 'unbatched 2-D'}"
                                 f" input, hx should be {'3-D' if batched else '2-D'}, got "
                                 f"shape {part.shape}")
        if not batched:
            parts = [p.unsqueeze(1) for p in parts]
        for part in parts:
            if part.shape != expected:
                raise ShapeError(f"{name}: expected hidden size {expected}, got {part.shape}")
            if part.dtype != like.dtype:
                raise DTypeError(f"{name}: hx dtype {part.dtype} does not match input dtype "
                                 f"{like.dtype}")
        states = [tuple(p[i] for p in parts) for i in range(count)]
        return [s if lstm else s[0] for s in states]

    def forward(self, input: Tensor, hx=None):
        """(output, h_n), or (output, (h_n, c_n)) for the LSTM: output (T, B, D * H) (batch
        first if batch_first; (T, D * H) for unbatched input), h_n (num_layers * D, B, H)."""
        batched = self._check_input(input)
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        states = self._initial_states(hx, batched, x.shape[1], input)
        directions = 1 + self.bidirectional
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for d in range(directions):
                out, state = run_layer(MODES[self.mode][0], x, states[layer * directions + d],
                                       self._weights(layer, d), reverse=d == 1)
                outputs.append(out)
                finals.append(state)
            x = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = dropout_fn(x, self.dropout)
        return self._result(x, finals, batched)

    def _result(self, output: Tensor, finals: list, batched: bool):
        if not batched:
            output = output.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        lstm = self.mode == "LSTM"
        parts = [stack([f[k] for f in finals], 0) for k in range(2)] if lstm else \
            [stack(finals, 0)]
        if not batched:
            parts = [p.squeeze(1) for p in parts]
        return output, (tuple(parts) if lstm else parts[0])

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text


class RNN(RNNBase):
    """Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu.

    >>> import ndlite
    >>> out, h = ndlite.nn.RNN(3, 4, num_layers=2)(ndlite.randn(5, 2, 3))
    >>> out.shape, h.shape
    ((5, 2, 4), (2, 2, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None,
                 backend=None):
        mode = "RNN_" + _nonlinearity("RNN", nonlinearity).upper()
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype, backend=backend)
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        text = super().extra_repr()
        return text if self.nonlinearity == "tanh" else \
            text + f", nonlinearity={self.nonlinearity!r}"


class LSTM(RNNBase):
    """Long short-term memory, gates i, f, g, o (PyTorch's order); forward returns
    (output, (h_n, c_n)). proj_size other than 0 is refused.

    >>> import ndlite
    >>> out, (h, c) = ndlite.nn.LSTM(3, 4, batch_first=True)(ndlite.randn(2, 5, 3))
    >>> out.shape, h.shape, c.shape
    ((2, 5, 4), (1, 2, 4), (1, 2, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None,
                 backend=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype, backend)


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n with n = tanh(W_in x + b_in + r (W_hn h + b_hn)),
    as PyTorch's."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None, backend=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype, backend)


class RNNCellBase(Module):
    """One step of a cell: weight_ih (gates * hidden, input), weight_hh (gates * hidden,
    hidden), bias_ih and bias_hh, all U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None, backend=None):
        super().__init__()
        name = type(self).__name__
        _positive_int(name, input_size, "input_size")
        _positive_int(name, hidden_size, "hidden_size")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        where = backend if backend is not None else device
        rows = num_chunks * hidden_size
        self.weight_ih = Parameter(empty(rows, input_size, dtype=dtype, backend=where))
        self.weight_hh = Parameter(empty(rows, hidden_size, dtype=dtype, backend=where))
        self.bias_ih = Parameter(empty(rows, dtype=dtype, backend=where)) if bias else None
        self.bias_hh = Parameter(empty(rows, dtype=dtype, backend=where)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            uniform_(weight, -bound, bound)

    def _zeros(self, input) -> Tensor:
        name = type(self).__name__
        if not isinstance(input, Tensor) or input.ndim not in (1, 2):
            raise ShapeError(f"{name}: expected input to be 1-D or 2-D, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        return zeros(input.shape[:-1] + (self.hidden_size,), dtype=input.dtype,
                     backend=input._backend)

    def _call(self, cell, input, hx):
        return cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity!r}"
        return text


class RNNCell(RNNCellBase):
    """h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh); hx defaults to zeros.

    >>> import ndlite
    >>> ndlite.nn.RNNCell(3, 4)(ndlite.randn(2, 3)).shape
    (2, 4)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None, backend=None):
        _nonlinearity("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, 1, device, dtype, backend)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        hx = self._zeros(input) if hx is None else hx
        cell = rnn_tanh_cell if self.nonlinearity == "tanh" else rnn_relu_cell
        return self._call(cell, input, hx)


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c'); hx = (h, c) defaults to zeros."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None, backend=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype, backend)

    def forward(self, input: Tensor, hx=None) -> tuple:
        if hx is None:
            hx = (self._zeros(input),) * 2
        return self._call(lstm_cell, input, hx)


class GRUCell(RNNCellBase):
    """One GRU step (PyTorch's gates r, z, n); hx defaults to zeros."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None, backend=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype, backend)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        hx = self._zeros(input) if hx is None else hx
        return self._call(gru_cell, input, hx)
