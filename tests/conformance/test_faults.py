"""The kit proves itself: each faulty backend (the reference with one realistic bug, see
faulty_backends.py) is flagged on the ops its bug affects, and the unmodified reference,
registered the same way, passes those very ops."""

import pytest
from hypothesis import HealthCheck, Phase, settings

import ndlite
from ndlite.testing.catalog import dtype_skip_reason
from ndlite.testing.runner import FAIL, PASS, run

from .faulty_backends import FAULTS, Faithful

# no shrinking: finding a failing example is what is tested here (the CLI shrinks)
SEARCH = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck),
                  phases=[Phase.explicit, Phase.generate])
CAUGHT = [pytest.param(fault.name, op, dtype, id=f"{fault.name}-{op}-{dtype}")
          for fault in FAULTS.values() for op in fault.ops for dtype in fault.dtypes]
SAME_OPS = sorted({(op, dtype) for fault in FAULTS.values() for op in fault.ops
                   for dtype in fault.dtypes})


def _skip_missing(dtype):
    why = dtype_skip_reason(ndlite.get_backend(Faithful.name), dtype)
    if why:
        pytest.skip(why)  # bfloat16 without ml_dtypes


@pytest.fixture(scope="module", autouse=True)
def registered():
    ndlite.register_backend(Faithful.name, Faithful)
    for fault in FAULTS.values():
        ndlite.register_backend(fault.name, fault.backend)


@pytest.mark.parametrize(("fault", "op", "dtype"), CAUGHT)
def test_the_kit_flags_the_fault(fault, op, dtype):
    _skip_missing(dtype)
    result = run(op, fault, dtype, SEARCH)
    assert result.status == FAIL, (
        f"{FAULTS[fault].what}: {op} passed {result.examples} examples on {fault}")
    assert result.reproduce.startswith("ndlite conformance --backend ")
    assert result.example, result.reason
    assert FAULTS[fault].check in result.reason


@pytest.mark.parametrize(("op", "dtype"), SAME_OPS)
def test_the_reference_passes_the_same_ops(op, dtype):
    _skip_missing(dtype)
    result = run(op, Faithful.name, dtype, SEARCH)
    assert result.status == PASS, result.reason
    assert result.examples == SEARCH.max_examples
