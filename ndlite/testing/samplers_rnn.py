"""The hypothesis sampler of the recurrent cells (ndlite/ops/recurrent.py): a batched or
unbatched input, the hidden state (and cell state for the LSTM), weights stacked by gate and
optional biases; for relu cells, pre-activations kept away from relu's kink at 0."""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from ..ops.recurrent import GATES, RNN_CELL
from .kinks import MARGIN
from .samplers import Case, arrays, sampler


def _relu_pre_activation(inputs: list, bias: bool) -> np.ndarray:
    x, h, w_ih, w_hh = (np.asarray(a, np.float64) for a in inputs[:4])
    pre = x @ w_ih.T + h @ w_hh.T
    if bias:
        pre = pre + np.asarray(inputs[4], np.float64) + np.asarray(inputs[5], np.float64)
    return pre


@sampler(RNN_CELL)
def _rnn_cell(spec, dtype):
    mode = spec.params["mode"]
    gates = GATES[mode]
    lstm = mode == "lstm"

    @st.composite
    def draw_case(draw):
        size, hidden = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        batch = draw(st.sampled_from([(), (1,), (2,), (3,)]))
        inputs = [draw(arrays(dtype, batch + (size,))), draw(arrays(dtype, batch + (hidden,)))]
        if lstm:
            inputs.append(draw(arrays(dtype, batch + (hidden,))))
        inputs += [draw(arrays(dtype, (gates * hidden, size), -1.0, 1.0)),
                   draw(arrays(dtype, (gates * hidden, hidden), -1.0, 1.0))]
        bias = draw(st.booleans())
        if bias:
            inputs += [draw(arrays(dtype, (gates * hidden,))) for _ in range(2)]
        if mode == "rnn_relu":
            assume(np.all(np.abs(_relu_pre_activation(inputs, bias)) >= 4 * MARGIN))

        def invoke(fn, tensors, params):
            hx = (tensors[1], tensors[2]) if lstm else tensors[1]
            return fn(tensors[0], hx, *tensors[3 if lstm else 2:])

        return Case(inputs, {}, invoke=invoke)

    return draw_case()
