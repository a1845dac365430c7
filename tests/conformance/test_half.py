"""The kit in half precision (issue 16, item 4): the half tolerances, the tight check that
tells float32 accumulation from half accumulation, the bitwise rule of + - * / sqrt, the
drawn inputs, and the capability skip. The faulty half backends are in test_faults.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ndlite
from ndlite.dtypes import HALF, as_dtype, finfo
from ndlite.ops.registry import EXACT, ROUNDS_ONCE, SCALED
from ndlite.testing.catalog import dtype_skip_reason, get_op
from ndlite.testing.samplers import arrays
from ndlite.testing.tolerance import judge, tight_half

HALVES = [str(d) for d in HALF]


def _dot_in_half(a, b, dtype):
    acc = np.zeros((), dtype)
    for x, y in zip(a, b):
        acc = (acc + (x * y).astype(dtype)).astype(dtype)
    return acc


@pytest.mark.parametrize("dtype", HALVES)
def test_tight_check_flags_half_accumulation_that_scaled_passes(dtype):
    dtype = as_dtype(dtype)
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 1.0, 256).astype(dtype)
    b = rng.uniform(0.5, 1.0, 256).astype(dtype)
    reference = np.array(a.astype(np.float64) @ b.astype(np.float64))
    scale = np.abs(reference)  # no cancellation: S = |r|
    rounds = np.array(255.0)  # 256 terms
    wide = np.array((a.astype(np.float32) @ b.astype(np.float32)).astype(dtype))
    narrow = np.array(_dot_in_half(a, b, dtype))
    assert judge(wide, reference, SCALED, dtype, scale, rounds).ok
    assert tight_half(wide, reference, dtype, scale, rounds).ok
    # a half accumulator errs by many half ulps, yet within 255 eps S: the scaled rule passes
    assert abs(float(narrow) - float(reference)) > float(finfo(dtype).eps) * reference
    assert judge(narrow, reference, SCALED, dtype, scale, rounds).ok
    verdict = tight_half(narrow, reference, dtype, scale, rounds)
    assert not verdict.ok and "tight half" in verdict.message


@pytest.mark.parametrize("dtype", HALVES)
def test_half_tolerances_use_the_half_eps(dtype):
    dtype = as_dtype(dtype)
    eps = float(finfo(dtype).eps)
    one = np.array([1.0], dtype)
    assert judge(one, np.array([1.0 + eps]), "transcendental", dtype).ok  # one ulp
    assert not judge(one, np.array([1.0 + 3 * eps]), "transcendental", dtype).ok
    assert not judge(one, np.array([1.0 + eps]), EXACT, dtype).ok


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.divide])
def test_arithmetic_in_half_is_correctly_rounded(dtype, ufunc):
    """Computed in float32 and rounded once, + - * / equal the float64 result rounded once:
    why the kit can ask for them bitwise."""
    dtype = as_dtype(dtype)
    rng = np.random.default_rng(2)
    a = rng.uniform(-4, 4, 4096).astype(dtype)
    b = rng.uniform(0.25, 4, 4096).astype(dtype)
    name = {np.add: "add", np.subtract: "sub", np.multiply: "mul", np.divide: "div"}[ufunc]
    got = getattr(ndlite, name)(ndlite.tensor(a), ndlite.tensor(b)).numpy()
    want = ufunc(a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    assert judge(got, want.astype(np.float64), EXACT, dtype).ok
    root = ndlite.tensor(np.abs(a)).sqrt().numpy()
    assert judge(root, np.sqrt(np.abs(a).astype(np.float64)).astype(dtype).astype(np.float64),
                 EXACT, dtype).ok


def test_specs_carry_the_half_rules():
    for name in ("add", "sub", "mul", "div", "sqrt"):
        assert get_op(name).spec.half_tol == EXACT, name
    for name in ("matmul", "mm", "sum"):
        assert get_op(name).spec.half_tol == ROUNDS_ONCE, name
    assert "float16" in get_op("exp").spec.dtypes and "bfloat16" in get_op("matmul").spec.dtypes


@pytest.mark.parametrize("dtype", HALVES)
def test_drawn_half_inputs_are_exact_bounded_and_normal(dtype):
    dtype = as_dtype(dtype)

    @settings(max_examples=30, database=None, deadline=None)
    @given(st.data())
    def draw(data):
        x = data.draw(arrays(dtype, (16,), lo=0.05, hi=3.0))
        assert x.dtype == dtype
        assert ((x >= 0.05) & (x <= 3.0)).all()
        assert (np.abs(x.astype(np.float32)) >= float(finfo(dtype).tiny)).all()

    draw()


def test_capability_skip():
    class NoHalf(ndlite.get_backend("numpy").__class__):
        dtypes = ndlite.device.Backend.dtypes  # float32, float64, ints, bool: no halves

    backend = NoHalf()
    assert dtype_skip_reason(backend, "float32") is None
    assert "float16" in dtype_skip_reason(backend, "float16")
    assert dtype_skip_reason(ndlite.get_backend("numpy"), "float16") is None


def test_opencl_reports_its_halves():
    # stored in half, computed in float32 (backends/ndlite_opencl/halves.py), so the kit's
    # half tests run on it
    try:
        backend = ndlite.get_backend("opencl")
    except ndlite.BackendUnavailableError as exc:
        pytest.skip(str(exc))
    for dtype in HALVES:
        assert as_dtype(dtype) in backend.dtypes
        assert not dtype_skip_reason(backend, dtype)


def test_numpy_backend_arms_its_half_wrappers_at_the_first_half_buffer():
    from ndlite_numpy import NumpyBackend

    from ndlite.device.halfmath import native_half

    class Native(NumpyBackend):
        @native_half
        def matmul(self, a, b):
            return super().matmul(a, b)

    backend = Native()
    assert not hasattr(backend.sum, "__wrapped__")  # float32 work pays no dtype test
    backend.full((2,), 1.0, np.dtype("float32"))
    assert not hasattr(backend.sum, "__wrapped__")
    half = backend.astype(backend.full((3, 4), 0.5, np.dtype("float32")), np.float16)
    assert hasattr(backend.sum, "__wrapped__") and not hasattr(backend.matmul, "__wrapped__")
    assert "from_numpy" not in vars(backend)  # the creators are as they were
    total = backend.sum(half, (0, 1), False)
    assert total.dtype == np.float16 and float(total) == 6.0
