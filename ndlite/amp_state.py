"""Autocast's state (per thread, like grad mode) and its policy: which dtype each op computes
in inside an autocast region. The one apply path of the ops (ops/dispatch.py) reads `state`
and `POLICY`; the public API over them is ndlite.amp (autocast, GradScaler).

The policy is PyTorch's (https://pytorch.org/docs/stable/amp.html, "Autocast Op Reference",
the CUDA lists, for every device):
- LOW: matrix products and convolutions run in the region's dtype (float16 or bfloat16);
- FP32: ops whose range or accuracy needs float32 (exp, log, pow, softmax, sums, norms,
  losses) run in float32;
- PROMOTE: ops of several inputs run in the widest of their input dtypes.
Ops not listed run in the dtype of their inputs (binary ops promote as always). Only float16,
bfloat16 and float32 inputs are cast; float64 and integer inputs never are.

The casts are made in ndlite/ops/autocast.py: by the apply path (dispatch.py) for every op,
by the primitives that check dtypes or record before it, and by `@autocast_op(name)` on the
entry of the composite ops listed here (cross_entropy, mse_loss, conv1d, the RNN cells, ...);
mm, bmm, stack and multi_head_attention_forward obey through matmul, linear and cat.
"""

from __future__ import annotations

import threading

LOW, FP32, PROMOTE = "low", "fp32", "promote"

_LOW = ("matmul", "mm", "bmm", "linear", "conv1d", "conv2d", "conv_transpose1d",
        "conv_transpose2d", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
        "scaled_dot_product_attention", "multi_head_attention_forward")
_FP32 = ("exp", "expm1", "log", "log10", "log2", "log1p", "acos", "asin", "cosh", "sinh", "tan",
         "pow", "reciprocal", "rsqrt", "softplus", "softmax", "log_softmax", "causal_softmax",
         "logsumexp", "sum", "prod", "cumsum", "cumprod", "layer_norm", "group_norm", "rms_norm",
         "vector_norm", "normalize", "cosine_similarity", "nll_loss", "cross_entropy",
         "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
         "binary_cross_entropy_with_logits")
_PROMOTE = ("atan2", "cat", "stack", "scatter_add")

#: op name -> LOW, FP32 or PROMOTE: the one table autocast follows
POLICY: dict[str, str] = {**dict.fromkeys(_LOW, LOW), **dict.fromkeys(_FP32, FP32),
                          **dict.fromkeys(_PROMOTE, PROMOTE)}


class _Switch:
    """How many enabled autocast regions are open, in all threads: the apply path reads this
    one plain attribute (a thread-local read costs ~50 ns an op) and looks at the thread's
    own `state` only when it is not zero."""

    __slots__ = ("on",)

    def __init__(self):
        self.on = 0


switch = _Switch()
_lock = threading.Lock()


def count_region(step: int) -> None:
    """Open (+1) or close (-1) an enabled region in `switch`."""
    with _lock:
        switch.on += step


class _State(threading.local):
    """Autocast in the current thread; every thread starts with it off."""

    enabled = False
    dtype = None  # the low-precision dtype of the innermost enabled region
    cache_enabled = True
    #: (id(leaf), dtype) -> (leaf, its cast): parameters cast once per region
    cache: dict = {}
    nesting = 0

    def __init__(self):
        self.cache = {}


state = _State()


def clear_cache() -> None:
    """Forget the casts of parameters made in this thread's autocast regions."""
    state.cache.clear()
