"""The yardstick itself: the reference's gradients agree with float64 central differences
along random directions (gradcheck), and so do its second derivatives (gradgradcheck), on
inputs drawn from each op's spec and moved off its kinks. Every comparison of the suite rests
on these. (In ndlite's own tree, tests/core/test_gradcheck_ops.py runs the same checks.)"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ndlite.ops.registry import resolve
from ndlite.testing import gradcheck, gradgradcheck, kinks, strategy
from ndlite.testing.catalog import get_op, op_names
from ndlite.testing.compare import REFERENCE

DIFFERENTIABLE = [n for n in op_names() if get_op(n).spec.grad
                  and "float64" in get_op(n).spec.dtypes]
SECOND_ORDER = [n for n in DIFFERENTIABLE if get_op(n).spec.second_order]


def _prepared(name, data):
    op = get_op(name)
    case = data.draw(strategy(op.spec, "float64"), label="case")
    grad = case.differentiable()
    inputs = kinks.apply(op.spec.kinks, case.inputs, case.params, grad)
    fn = resolve(op)
    return inputs, grad, (lambda tensors: case.call(fn, tensors))


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@given(data=st.data())
def test_reference_gradcheck(name, data):
    inputs, grad, call = _prepared(name, data)
    gradcheck(call, inputs, grad, backend=REFERENCE, name=name)


@pytest.mark.parametrize("name", SECOND_ORDER)
@given(data=st.data())
def test_reference_second_order(name, data):
    inputs, grad, call = _prepared(name, data)
    gradgradcheck(call, inputs, grad, backend=REFERENCE, name=name)
