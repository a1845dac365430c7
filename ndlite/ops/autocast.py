"""Autocast's casts: the inputs of an op as the policy of ndlite.amp_state has it take them
inside an autocast region (float32/float16/bfloat16 tensors to the region's low dtype, to
float32, or to the widest of them; float64 and integers never). The apply path (dispatch.py:
`unary`, `binary`, `nary`) calls `autocast_inputs` for every op, and so do the primitives that
check dtypes or record before it (matmul, linear, conv2d, layer_norm, sum); composite ops of
the policy wear `@autocast_op(name)`, which casts their tensor arguments on entry. Each hook
reads one plain attribute (`amp_state.switch.on`) when no region is open anywhere.

A parameter (a leaf that requires grad) cast to the low dtype while recording is cast once
per region, as in PyTorch: the cache is cleared when the outermost region ends. Gradients flow
back through the casts (astype is differentiable) to the float32 parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..amp_state import FP32, LOW, POLICY
from ..amp_state import state as amp_state
from ..amp_state import switch as amp
from ..dtypes import HALF, float32, promote
from ..graph import mode
from ..tensor import Tensor
from .cast import astype

_CASTABLE = (float32,) + HALF  # what autocast casts: never float64 or integers


def _target(rule: str, tensors) -> object:
    """The dtype `rule` casts to, given the op's tensors (None: nothing to cast)."""
    if rule is LOW:
        return amp_state.dtype
    if rule is FP32:
        return float32
    want = None
    for t in tensors:
        if t.__class__ is Tensor and t._data.dtype in _CASTABLE:
            want = t._data.dtype if want is None else promote(want, t._data.dtype)
    return want


def _cast(t, dtype):
    if t.__class__ is Tensor and t._data.dtype != dtype and t._data.dtype in _CASTABLE:
        return _autocast(t, dtype)
    return t


def _autocast(t: Tensor, dtype) -> Tensor:
    """`t` as `dtype`, through the region's cache for a parameter cast to the low dtype."""
    if not (t._rg and t._node is None and dtype is amp_state.dtype and amp_state.cache_enabled
            and mode.enabled):
        return astype(t, dtype)
    key = (id(t), dtype)
    hit = amp_state.cache.get(key)
    if hit is not None and hit[0] is t:
        return hit[1]
    out = astype(t, dtype)
    amp_state.cache[key] = (t, out)  # the leaf too: its id stays its own while the entry lives
    return out


def autocast_inputs(op, inputs: tuple) -> tuple:
    """`inputs` (tensors, numbers, None) of `op` as the policy has it take them in this
    thread's region (unchanged outside one, or for an op the policy does not list)."""
    if not amp_state.enabled:
        return inputs
    rule = POLICY.get(op.name)
    if rule is None:
        return inputs
    want = _target(rule, inputs)
    if want is None:
        return inputs
    return tuple(_cast(t, want) for t in inputs)


def _cast_argument(value, dtype):
    if isinstance(value, (tuple, list)):  # an LSTM's (h, c), a list of tensors
        return type(value)(_cast(t, dtype) for t in value)
    return _cast(value, dtype)


def autocast_op(name: str) -> Callable:
    """Decorator for the function of a composite op in the policy (`name` must be listed):
    inside a region, its tensor arguments, and the tensors in tuple or list arguments, are
    cast as the op's category says before it runs."""
    rule = POLICY[name]

    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if amp.on and amp_state.enabled:
                values = [*args, *kwargs.values()]
                flat = [t for v in values for t in (v if isinstance(v, (tuple, list)) else (v,))]
                want = _target(rule, flat)
                if want is not None:
                    args = tuple(_cast_argument(a, want) for a in args)
                    kwargs = {k: _cast_argument(v, want) for k, v in kwargs.items()}
            return fn(*args, **kwargs)

        return wrapper

    return deco
