"""The kit proves itself: each faulty backend (the reference with one realistic bug, see
faulty_backends.py) is flagged on the ops its bug affects, and the unmodified reference,
registered the same way, passes those very ops."""

import pytest
from hypothesis import HealthCheck, Phase, settings

import ndlite
from ndlite.testing.runner import FAIL, PASS, run

from .faulty_backends import FAULTS, Faithful

# no shrinking: finding a failing example is what is tested here (the CLI shrinks)
SEARCH = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck),
                  phases=[Phase.explicit, Phase.generate])
CAUGHT = [pytest.param(fault.name, op, id=f"{fault.name}-{op}")
          for fault in FAULTS.values() for op in fault.ops]


@pytest.fixture(scope="module", autouse=True)
def registered():
    ndlite.register_backend(Faithful.name, Faithful)
    for fault in FAULTS.values():
        ndlite.register_backend(fault.name, fault.backend)


@pytest.mark.parametrize(("fault", "op"), CAUGHT)
def test_the_kit_flags_the_fault(fault, op):
    result = run(op, fault, "float32", SEARCH)
    assert result.status == FAIL, (
        f"{FAULTS[fault].what}: {op} passed {result.examples} examples on {fault}")
    assert result.reproduce.startswith("ndlite conformance --backend ")
    assert result.example, result.reason
    assert FAULTS[fault].check in result.reason


@pytest.mark.parametrize("op", sorted({op for fault in FAULTS.values() for op in fault.ops}))
def test_the_reference_passes_the_same_ops(op):
    result = run(op, Faithful.name, "float32", SEARCH)
    assert result.status == PASS, result.reason
    assert result.examples == SEARCH.max_examples
