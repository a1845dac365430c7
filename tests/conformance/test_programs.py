"""The program fuzzer (ndlite.testing.programs) at a bounded, derandomized profile: small
programs of views, in-place ops and grad modes, on each backend, against float64 finite
differences of the whole program, the reference backend and PyTorch where it is installed.
A longer run: `ndlite conformance --programs --max-examples 2000 --seed N`."""

import numpy as np
from hypothesis import HealthCheck, given, settings

from ndlite.testing.programs import Program, check, programs

CI = settings(max_examples=300, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=True)


def test_programs_agree_with_every_oracle(backend):
    @CI
    @given(programs())
    def run(program):
        check(program, backend)

    run()


def test_the_fuzzer_finds_a_wrong_view_gradient():
    """The shrunk program that found defect 1 of issue 12 on the old engine replays."""
    program = Program([np.array([0.5, -1.0])],
                      [("sum", 0, 0), ("view", 1, "reshape", (-1,)), ("inplace", "mul_", 2, 3.0)])
    assert check(program, "numpy") == "ok"
