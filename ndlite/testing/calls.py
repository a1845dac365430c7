"""Small adapters that let specs call ops whose arguments are not plain tensors.

A spec names them as `call="ndlite.testing.calls:NAME"`; each takes tensors and the drawn
params and returns the op's result.
"""

from __future__ import annotations

import numpy as np

import ndlite


def getitem(x, key):
    """x[key] (the key is drawn with NumPy arrays; integer arrays go in as tensors half the
    time, to test both kinds of index)."""
    return x[_with_tensor_indices(key, x)]


def _with_tensor_indices(key, x):
    out = []
    for i, k in enumerate(key):
        if isinstance(k, np.ndarray) and k.dtype.kind in "iu" and i % 2 == 0:
            out.append(ndlite.tensor(k, backend=x.backend))
        else:
            out.append(k)
    return tuple(out)


def slice_grad(x, key):
    """The gradient of sum(x[key] ** 2) with the graph kept: its forward is the slice's adjoint
    (the gradient written into zeros), its own gradient slices again."""
    if not x.requires_grad:
        x = x.detach().requires_grad_()
    with ndlite.enable_grad():
        return ndlite.autograd.grad((x[key] ** 2).sum(), [x], create_graph=True)[0]


def index_put(x, value, key):
    """A copy of x with x[key] = value, differentiable in both."""
    out = x * 1.0
    out[key] = value
    return out


def astype_float64(x):
    """x cast to float64 and back (the cast's gradient is the reverse cast)."""
    if np.dtype("float64") not in x.backend.dtypes:
        return x.astype(x.dtype) * 1.0
    return x.astype(ndlite.float64).astype(x.dtype)


def transfer_roundtrip(x):
    """x copied to the NumPy backend and back (the gradient travels back too)."""
    return x.to("numpy").to(x.backend) * 1.0
