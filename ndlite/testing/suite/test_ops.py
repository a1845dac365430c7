"""Every registered op, on the backend under test, against the reference: forward values,
the VJP of every differentiable input, and a bitwise-identical second run (`compare`); for
the ops whose spec asks for it, the same for their VJP (second-order: Hessian-vector products).

Cases come from each op's spec (`ndlite.testing.samplers`); a dtype the backend does not
report is skipped with the reason, and a dtype the spec does not list is not generated.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ndlite.dtypes import as_dtype
from ndlite.ops.registry import FLOATS
from ndlite.testing.catalog import dtype_skip_reason, get_op, op_names
from ndlite.testing.compare import cases, check

DTYPES = FLOATS  # float16 and bfloat16 too: skipped where the backend lacks them


def _params(second_order=False):
    for name in op_names():
        spec = get_op(name).spec
        if second_order and not spec.second_order:
            continue
        for dtype in DTYPES:
            if dtype in spec.dtypes:
                yield pytest.param(name, dtype, id=f"{name}-{dtype}")


@pytest.mark.parametrize(("name", "dtype"), list(_params()))
@given(data=st.data())
def test_op(ndlite_backend, name, dtype, data):
    why = dtype_skip_reason(ndlite_backend, dtype)
    if why:
        pytest.skip(why)
    case = data.draw(cases(name, dtype), label="case")
    seed = data.draw(st.integers(0, 2**16 - 1), label="cotangent seed")
    check(name, case, ndlite_backend, as_dtype(dtype), seed)


@pytest.mark.parametrize(("name", "dtype"), list(_params(second_order=True)))
@given(data=st.data())
def test_second_order(ndlite_backend, name, dtype, data):
    why = dtype_skip_reason(ndlite_backend, dtype)
    if why:
        pytest.skip(why)
    case = data.draw(cases(name, dtype), label="case")
    seed = data.draw(st.integers(0, 2**16 - 1), label="cotangent seed")
    check(name, case, ndlite_backend, as_dtype(dtype), seed, order=2)
