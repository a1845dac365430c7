"""Every differentiable op in the registry passes a float64 central-difference gradcheck on
inputs drawn from its spec (shapes with size-1 dims, broadcasting pairs, all parameters)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ndlite.ops import OPS, resolve
from ndlite.testing import gradcheck, gradgradcheck, kinks, strategy

DIFFERENTIABLE = sorted(name for name, op in OPS.items() if op.spec and op.spec.grad)
SECOND_ORDER = sorted(name for name, op in OPS.items() if op.spec and op.spec.second_order)
SECOND_ORDER += ["getitem", "slice", "index_put"]


def _prepared(op, data):
    case = data.draw(strategy(op.spec, "float64"))
    grad = case.differentiable()
    inputs = kinks.apply(op.spec.kinks, case.inputs, case.params, grad)
    fn = resolve(op)
    return case, inputs, grad, (lambda tensors: case.call(fn, tensors))


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@given(data=st.data())
def test_gradcheck(name, data):
    op = OPS[name]
    case, inputs, grad, call = _prepared(op, data)
    gradcheck(call, inputs, grad, name=name)


@pytest.mark.parametrize("name", SECOND_ORDER)
@given(data=st.data())
def test_second_order(name, data):
    op = OPS[name]
    case, inputs, grad, call = _prepared(op, data)
    gradgradcheck(call, inputs, grad, name=name)


def test_every_op_has_a_spec():
    missing = [name for name, op in OPS.items() if op.spec is None]
    assert not missing, f"ops without a test spec: {missing}"


def test_registry_covers_the_public_api():
    import ndlite

    for name in ["add", "sub", "mul", "div", "pow", "exp", "log", "sqrt", "tanh", "sigmoid",
                 "relu", "abs", "maximum", "minimum", "where", "clamp", "sum", "mean", "var",
                 "std", "amax", "logsumexp", "matmul", "reshape", "permute", "expand", "cat",
                 "stack", "split", "chunk", "pad", "getitem", "gather", "linear"]:
        assert name in OPS, name
        assert callable(resolve(OPS[name]))
    assert np.isfinite(ndlite.tensor(1.0).item())
