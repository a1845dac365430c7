"""Casts and transfers: a tensor in another dtype (`astype`) or on another backend
(`transfer`), both differentiable. Below the apply path (dispatch.py), which casts operands
to their promoted dtype with `astype`."""

from __future__ import annotations

import functools

from ..dtypes import HALF, as_dtype, float32, is_floating
from ..errors import DTypeError
from ..graph import attach
from ..tensor import Tensor
from .registry import EXACT, Op, Spec, implements, register
from .samples import UNARY


def _through_float64(x):
    """The spec's call: x cast to float64 and back (the cast's gradient is the reverse cast)."""
    if as_dtype("float64") not in x.backend.dtypes:
        return x.astype(x.dtype) * 1.0
    return x.astype("float64").astype(x.dtype)


def _roundtrip(x):
    """The spec's call: x copied to the NumPy backend and back (the gradient travels back)."""
    return x.to("numpy").to(x.backend) * 1.0


@register
class AsType(Op):
    name = "astype"
    spec = Spec(UNARY, call=_through_float64, tol=EXACT)

    @staticmethod
    def forward(b, x, dtype):
        return b.astype(x, dtype)

    @staticmethod
    def backward(node, grad):
        # gradients flow between float dtypes only (an int result has no gradient)
        return astype(grad, node.params["source"])


@implements(AsType)
def astype(x: Tensor, dtype) -> Tensor:
    """x converted to `dtype` (a new tensor; differentiable between float dtypes)."""
    dtype = as_dtype(dtype)
    if dtype is x.dtype:
        return x
    if dtype not in x._backend.dtypes:
        raise DTypeError(f"astype: backend {x._backend.name} does not support {dtype}")
    out = Tensor._make(x._backend.astype(x._data, dtype), x._backend)
    if not is_floating(dtype):
        return out
    return attach(AsType, (x,), out, {"dtype": dtype, "source": x.dtype})


@register
class Transfer(Op):
    name = "transfer"
    spec = Spec(UNARY, call=_roundtrip, tol=EXACT)

    @staticmethod
    def forward(b, x, target):
        return target.from_numpy(b.to_numpy(x))

    @staticmethod
    def backward(node, grad):
        return transfer(grad, node.params["source"])


@implements(Transfer)
def transfer(x: Tensor, target) -> Tensor:
    """x copied to another backend (differentiable: the gradient comes back)."""
    if x.dtype not in target.dtypes:
        raise DTypeError(f"to: backend {target.name} does not support {x.dtype}")
    out = Tensor._make(target.from_numpy(x._backend.to_numpy(x._data)), target)
    attach(Transfer, (x,), out, {"target": target, "source": x._backend})
    if out._node is not None:
        out._node.backend = target
    return out


def widened(fn):
    """A composite that reduces (mean, var, logsumexp), run on float32 when its input is
    half and rounded once at the end, as PyTorch accumulates half in float32 (differentiable:
    the casts carry the gradient back in the input's dtype)."""

    @functools.wraps(fn)
    def call(x, *args, **kwargs):
        if isinstance(x, Tensor) and x.dtype in HALF and kwargs.get("dtype") is None:
            return astype(fn(astype(x, float32), *args, **kwargs), x.dtype)
        return fn(x, *args, **kwargs)

    return call


def forward_in_float32(forward):
    """An op's forward over buffers, run on float32 copies of a half input and rounded once."""

    @functools.wraps(forward)
    def run(b, x, *args, **kwargs):
        if x.dtype in HALF:
            return b.astype(forward(b, b.astype(x, float32), *args, **kwargs), x.dtype)
        return forward(b, x, *args, **kwargs)

    return run
