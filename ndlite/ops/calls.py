"""Adapters that let the specs of indexing ops call them with drawn arguments (a key, a value)
instead of plain tensors: `Spec(..., call=getitem_case)`. Each takes tensors and the drawn
params and returns the op's result, through the public Tensor API."""

from __future__ import annotations

import numpy as np

from .. import autograd
from ..creation import tensor
from ..graph import enable_grad


def getitem_case(x, key):
    """x[key] (the key is drawn with NumPy arrays; integer arrays go in as tensors half the
    time, to test both kinds of index)."""
    return x[_with_tensor_indices(key, x)]


def _with_tensor_indices(key, x):
    out = []
    for i, k in enumerate(key):
        if isinstance(k, np.ndarray) and k.dtype.kind in "iu" and i % 2 == 0:
            out.append(tensor(k, backend=x.backend))
        else:
            out.append(k)
    return tuple(out)


def slice_grad_case(x, key):
    """The gradient of sum(x[key] ** 2) with the graph kept: its forward is the slice's adjoint
    (the gradient written into zeros), its own gradient slices again."""
    if not x.requires_grad:
        x = x.detach().requires_grad_()
    with enable_grad():
        return autograd.grad((x[key] ** 2).sum(), [x], create_graph=True)[0]


def index_put_case(x, value, key):
    """A copy of x with x[key] = value, differentiable in both."""
    out = x * 1.0
    out[key] = value
    return out
