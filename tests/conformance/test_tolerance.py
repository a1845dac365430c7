"""The yardsticks of the kit: the tolerance policy (judge), S (the magnitude backend, following
the reference's decisions) and R (rounding counts)."""

import numpy as np

import ndlite
from ndlite.testing import judge
from ndlite.testing.compare import execute
from ndlite.testing.magnitude import magnitude_backend, recording_backend
from ndlite.testing.roundings import rounding_backend
from ndlite.testing.samplers import Case

EPS32 = float(np.finfo(np.float32).eps)


def test_scaled_tolerates_cancellation_that_a_relative_tolerance_would_not():
    # 1e4 + 1 - 1e4 in float32: the result 1 carries an error of the order of eps * 1e4
    reference, actual = np.array(1.0), np.float32(1.0009766)
    assert not np.isclose(actual, reference, rtol=1e-5, atol=0)
    assert judge(actual, reference, "scaled", "float32", scale=2e4 + 1).ok
    assert not judge(actual, reference, "scaled", "float32", scale=1.0).ok


def test_scaled_allows_8_eps_s_and_no_more():
    s = 3.0
    assert judge(np.float32(0.0), np.array(7.9 * EPS32 * s), "scaled", "float32", s).ok
    verdict = judge(np.float32(0.0), np.array(8.5 * EPS32 * s), "scaled", "float32", s)
    assert not verdict.ok and 1.05 < verdict.worst < 1.07


def test_rounding_counts_widen_the_allowance_of_long_sums():
    s = 3.0
    error = np.array(20 * EPS32 * s)
    assert not judge(np.float32(0.0), error, "scaled", "float32", s).ok
    assert judge(np.float32(0.0), error, "scaled", "float32", s, roundings=24).ok


def test_exact_is_bitwise():
    assert not judge(np.float32([-0.0]), np.array([0.0]), "exact", "float32").ok
    assert judge(np.float32([np.nan, 1.5]), np.array([np.nan, 1.5]), "exact", "float32").ok
    assert not judge(np.float32([1.0000001]), np.array([1.0]), "exact", "float32").ok


def test_transcendental_is_rtol_atol():
    assert judge(np.float32(1.0 + 9e-6), np.array(1.0), "transcendental", "float32").ok
    assert not judge(np.float32(1.0 + 2e-5), np.array(1.0), "transcendental", "float32").ok


def test_magnitudes_count_a_subtraction_as_an_addition():
    m = magnitude_backend()
    out = m.sub(m.from_numpy(np.array([1.0, -2.0])), m.from_numpy(np.array([3.0, 3.0])))
    assert m.to_numpy(out).tolist() == [4.0, 5.0]


def test_magnitudes_follow_the_reference_s_max_pool_choice():
    # values pick 1.0 (position 1); magnitudes alone would pick |-3.0| (position 0)
    x = np.array([[[[-3.0, 1.0]]]])
    case = Case([x], {"kernel_size": (1, 2)})
    fn = ndlite.nn.functional.max_pool2d
    cots = [np.array([[[[-2.0]]]])]
    recorder, magnitudes = recording_backend(), magnitude_backend()
    recorder.tape = []
    execute(fn, case, [x], recorder, [0], cots=cots)
    magnitudes.replay(recorder.tape)
    run, _ = execute(fn, case, [x], magnitudes, [0], cots=cots)
    assert run.grads[0].tolist() == [[[[0.0, 2.0]]]]


def test_roundings_count_the_terms_of_sums_and_products():
    r = rounding_backend()
    ones = np.ones((3, 5))
    assert r.to_numpy(r.sum(r.from_numpy(ones), (1,), False)).tolist() == [4.0] * 3
    product = r.matmul(r.from_numpy(ones), r.from_numpy(np.ones((5, 2))))
    assert r.to_numpy(product).tolist() == [[5.0, 5.0]] * 3  # 5 products, 4 additions


def test_signed_zero_ties_of_max_reductions_may_give_either_zero():
    # which zero a -0.0/0.0 tie gives is the reduction loop's choice: NumPy's float64 and
    # float32 loops differed here on one machine (AVX-512) and agreed on another, so no
    # reference can fix one, and amax/amin/max_pool2d (Spec.zero_ties) compare such zeros as
    # equal. A backend that answers every zero with the other sign still passes them.
    from ndlite_numpy import NumpyBackend

    from ndlite.testing import check
    from ndlite.testing.catalog import get_op

    def flipped(r, x, reduce, axes, keepdims):
        # the other zero than the float64 reference's, whichever that machine's loops give
        ref = reduce(np.asarray(x, np.float64), axis=axes, keepdims=keepdims)
        other = np.copysign(np.zeros_like(r), -np.copysign(1.0, ref)).astype(r.dtype)
        return np.where(r == 0, other, r)

    class OtherZero(NumpyBackend):
        kind = name = "other_zero"

        def max(self, x, axes, keepdims):
            return flipped(super().max(x, axes, keepdims), x, np.max, axes, keepdims)

        def min(self, x, axes, keepdims):
            return flipped(super().min(x, axes, keepdims), x, np.min, axes, keepdims)

    backend = OtherZero(None)
    a = np.array([[0.0, 0.0, -0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    mine = backend.max(a, (0, 1), False)
    assert mine == 0 and np.signbit(mine) != np.signbit(np.max(a.astype(np.float64)))
    for op in ("amax", "amin"):
        assert check(op, Case([a], {"dim": None, "keepdim": False}), backend, np.float32).ok
    assert get_op("amax").spec.zero_ties and not get_op("neg").spec.zero_ties


def test_registering_the_profiles_again_and_again_keeps_hypothesis_working():
    # each registration once chained one more fallback settings object (its parent was the
    # loaded profile): after a few hundred `ndlite conformance` runs in one process,
    # hypothesis hit a RecursionError walking the chain
    from hypothesis import settings

    from ndlite.testing import register_profiles

    for _ in range(50):
        name = register_profiles()
    depth, s = 0, settings.default
    while s is not None:
        s, depth = getattr(s, "_fallback", None), depth + 1
    assert depth <= 3
    assert settings.default.max_examples == settings.get_profile(name).max_examples
