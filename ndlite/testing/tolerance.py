"""The tolerance policy (DESIGN.md), as one function that judges a result against the reference.

- SCALED (contractions, arithmetic): |y - r| <= max(8, R) eps(dtype) S + 8 tiny(dtype) per
  element, where S is the op applied to the absolute values of the inputs in float64 (see
  `magnitude.py`) and R the number of roundings behind the element (`roundings.py`: a sum of
  n terms rounds n - 1 times). A plain rtol fails on cancellation; S knows how large the
  terms were. The `tiny` term (the smallest normal number) is the underflow allowance of the
  standard model of floating point: products of tiny inputs may go subnormal, or flush to
  zero on a GPU.
- EXACT (selection, movement): bitwise equal (-0.0 and 0.0 differ; NaN equals NaN).
- TRANSCENDENTAL: |y - r| <= atol + max(rtol, R eps) S, S = |r| unless given; rtol 1e-5,
  atol 1e-6 for float32 and rtol 1e-12, atol 1e-13 for float64; in float16/bfloat16 two
  half ulps (rtol 2 eps) and atol eps / 4.
- Half precision (float16, bfloat16) keeps these rules with the half's eps and tiny (the
  reference is still float64 on the same half inputs). SCALED alone would pass a backend that
  accumulates in half (its R eps S grows with the sum), so `tight_half` adds, for ops that
  round once (`Spec.rounds_once`), the bound of accumulating in float32 and rounding once:
  |y - r| <= eps_half |r| + 2 max(8, R) eps_float32 S + the half's smallest subnormal.

Where both results hold the same non-finite value (inf, -inf, NaN) the error there is 0.

>>> import numpy as np
>>> judge(np.float32([1.0, 2.0]), np.array([1.0, 2.0 + 1e-7]), "scaled", "float32").ok
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import finfo, float16, float32, is_floating, ml_dtypes
from ..ops.registry import EXACT, SCALED, TRANSCENDENTAL

TRANSCENDENTAL_TOL = {np.dtype("float32"): (1e-5, 1e-6), np.dtype("float64"): (1e-12, 1e-13)}
for _half in (float16, np.dtype(ml_dtypes.bfloat16)) if ml_dtypes is not None else (float16,):
    # two half ulps; the atol, a quarter ulp of 1, covers composites (attention, losses)
    # whose small results come out of the cancellation of terms near 1 rounded to the half
    _eps = float(finfo(_half).eps)
    TRANSCENDENTAL_TOL[_half] = (2 * _eps, _eps / 4)
#: the multiple of eps(dtype) * S that SCALED allows
SCALED_ULPS = 8


@dataclass
class Verdict:
    ok: bool
    worst: float  # the worst error in units of the tolerance (<= 1 passes)
    where: tuple | None = None
    message: str = ""


def _same_nonfinite(actual: np.ndarray, reference: np.ndarray) -> np.ndarray:
    a = actual.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(reference)
    same_inf = np.isinf(a) & np.isinf(reference) & (np.sign(a) == np.sign(reference))
    return both_nan | same_inf


def _exact(actual: np.ndarray, reference: np.ndarray) -> Verdict:
    expected = reference.astype(actual.dtype) if reference.dtype != actual.dtype else reference
    if is_floating(actual.dtype):
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
        same &= np.signbit(actual) == np.signbit(expected)  # bitwise: -0.0 and 0.0 differ
    else:
        same = actual == expected
    if same.all():
        return Verdict(True, 0.0)
    idx = tuple(int(i) for i in np.argwhere(~same)[0])
    return Verdict(False, np.inf, idx, f"not bitwise equal at {idx}: {actual[idx]!r} vs "
                                       f"reference {expected[idx]!r} "
                                       f"({int((~same).sum())} of {same.size} elements differ)")


def judge(actual, reference, tol: str, dtype, scale=None, roundings=None) -> Verdict:
    """Compare `actual` (a backend's result, as NumPy) with `reference` (float64) under `tol`.

    `scale` is S (broadcastable to the reference's shape); without it, |reference| is used.
    `roundings` (from `roundings.py`, per element) widens SCALED to max(8, R) eps S and
    TRANSCENDENTAL's rtol to max(rtol, R eps): long sums round more often.
    """
    actual = np.asarray(actual)
    reference = np.asarray(reference)
    dtype = np.dtype(dtype)
    if actual.shape != reference.shape:
        return Verdict(False, np.inf, None,
                       f"shape {actual.shape} differs from the reference's {reference.shape}")
    if actual.size == 0:
        return Verdict(True, 0.0)
    if actual.dtype.kind in "biu" or reference.dtype.kind in "biu" or tol == EXACT:
        return _exact(actual, reference)
    if tol not in (SCALED, TRANSCENDENTAL):
        raise ValueError(f"unknown tolerance class {tol!r}")
    reference = reference.astype(np.float64)
    s = np.abs(reference) if scale is None else np.asarray(scale, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(actual.astype(np.float64) - reference)
        info = finfo(dtype)
        ulps = SCALED_ULPS if roundings is None else np.maximum(SCALED_ULPS, roundings)
        if tol == SCALED:
            bound = ulps * float(info.eps) * s + SCALED_ULPS * float(info.tiny)
        else:  # R eps, not max(8, R) eps: in half, 8 eps would be 8 ulps, not rtol's 2
            rtol, atol = TRANSCENDENTAL_TOL[dtype]
            rounds = 1 if roundings is None else roundings
            bound = atol + np.maximum(rtol, rounds * float(info.eps)) * s
        bound = np.broadcast_to(bound, err.shape)
    return _verdict(actual, reference, err, bound, tol)


def tight_half(actual, reference, dtype, scale=None, roundings=None) -> Verdict:
    """The check that tells float32 accumulation from half accumulation: a result of an op
    that rounds once must be within one half ulp-ish (eps_half |r|) of the float64 reference,
    plus the error a float32 accumulator may make (2 max(8, R) eps_float32 S)."""
    actual, reference = np.asarray(actual), np.asarray(reference).astype(np.float64)
    if actual.size == 0:
        return Verdict(True, 0.0)
    s = np.abs(reference) if scale is None else np.asarray(scale, dtype=np.float64)
    half = finfo(np.dtype(dtype))
    ulps = SCALED_ULPS if roundings is None else np.maximum(SCALED_ULPS, roundings)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(actual.astype(np.float64) - reference)
        bound = (float(half.eps) * np.abs(reference) + 2 * ulps * float(finfo(float32).eps) * s
                 + float(half.smallest_subnormal))
        bound = np.broadcast_to(bound, err.shape)
    return _verdict(actual, reference, err, bound, "tight half")


def _verdict(actual, reference, err, bound, tol: str) -> Verdict:
    with np.errstate(invalid="ignore", over="ignore"):
        units = np.where(err == 0, 0.0, err / bound)
    units = np.where(_same_nonfinite(actual, reference), 0.0, units)
    units = np.where(np.isnan(units), np.inf, units)
    worst = float(units.max())
    if worst <= 1:
        return Verdict(True, worst)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(units)), units.shape))
    return Verdict(False, worst, idx, f"error {err[idx]:.3g} at {idx} is {worst:.3g}x the "
                                      f"{tol} tolerance {bound[idx]:.3g} (value {actual[idx]!r}, "
                                      f"reference {reference[idx]!r})")
