"""The kit on a backend that is not the reference object itself: a NumPy subclass registered
under its own name that, like many GPUs, has no float64. Its float32 results must pass, its
float64 cases must be skipped with the reason, and one wrong primitive must be flagged."""

import numpy as np
import pytest
from hypothesis import Phase, settings
from ndlite_numpy import NumpyBackend

import ndlite
from ndlite.testing.runner import FAIL, PASS, SKIP, run

FAST = settings(max_examples=15, database=None, deadline=None, derandomize=True,
                phases=[Phase.explicit, Phase.generate])  # test_cli.py covers shrinking


class Float32Only(NumpyBackend):
    kind = name = "fake32"
    dtypes = frozenset(np.dtype(t) for t in ("float32", "int32", "int64", "bool"))

    def __init__(self, device=None):
        super().__init__(None)


class ExpOffByOneUlp(Float32Only):
    kind = name = "fake32_badexp"

    def __init__(self, device=None):
        super().__init__(None)
        self.exp = self._exp  # the reference binds ufuncs per instance

    def _exp(self, x):
        # a fast-math exp: one float32 step too large on a quarter of the values
        out = np.exp(x)
        bump = (np.arange(out.size).reshape(out.shape) % 4) == 0
        return np.where(bump, out * np.float32(1 + 1e-4), out).astype(x.dtype)


@pytest.fixture(scope="module", autouse=True)
def registered():
    ndlite.register_backend("fake32", Float32Only)
    ndlite.register_backend("fake32_badexp", ExpOffByOneUlp)


@pytest.mark.parametrize("op", ["add", "matmul", "sum", "exp", "amax", "getitem", "where"])
def test_a_faithful_backend_passes(op):
    result = run(op, "fake32", "float32", FAST)
    assert result.status == PASS, result.reason
    assert result.examples == 15


def test_missing_float64_is_skipped_with_the_reason():
    result = run("add", "fake32", "float64", FAST)
    assert result.status == SKIP
    assert "float64" in result.reason and "fake32" in result.reason


def test_a_wrong_primitive_is_flagged_with_a_reproduction():
    result = run("exp", "fake32_badexp", "float32", FAST)
    assert result.status == FAIL
    assert "transcendental tolerance" in result.reason
    assert "--reproduce" in result.reproduce and "--ops exp" in result.reproduce
    assert "inputs=" in result.example
