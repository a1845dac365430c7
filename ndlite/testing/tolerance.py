"""The tolerance policy (DESIGN.md), as one function that judges a result against the reference.

- SCALED (contractions, arithmetic): |y - r| <= 8 eps(dtype) S per element, where S is the op
  applied to the absolute values of the inputs in float64. A plain rtol fails on cancellation;
  S knows how large the terms were.
- EXACT (selection, movement): bitwise equal.
- TRANSCENDENTAL: rtol 1e-5, atol 1e-6 for float32; rtol 1e-12, atol 1e-13 for float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ops.registry import EXACT, SCALED, TRANSCENDENTAL

TRANSCENDENTAL_TOL = {np.dtype("float32"): (1e-5, 1e-6), np.dtype("float64"): (1e-12, 1e-13)}


@dataclass
class Verdict:
    ok: bool
    worst: float  # the worst error in units of the tolerance (<= 1 passes)
    where: tuple | None = None
    message: str = ""


def judge(actual, reference, tol: str, dtype, scale=None) -> Verdict:
    """Compare `actual` (a backend's result, as NumPy) with `reference` (float64) under `tol`.

    `scale` is S for SCALED (same shape as reference); without it, |reference| is used.
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
        expected = reference.astype(actual.dtype) if reference.dtype != actual.dtype else reference
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected)) \
            if actual.dtype.kind == "f" else actual == expected
        if actual.dtype.kind == "f":  # bitwise: -0.0 and 0.0 differ too
            same &= np.signbit(actual) == np.signbit(expected)
        if same.all():
            return Verdict(True, 0.0)
        idx = tuple(int(i) for i in np.argwhere(~same)[0])
        return Verdict(False, np.inf, idx, f"not bitwise equal at {idx}: {actual[idx]!r} vs "
                                           f"reference {expected[idx]!r}")
    err = np.abs(actual.astype(np.float64) - reference)
    if tol == SCALED:
        s = np.abs(reference) if scale is None else np.asarray(scale, dtype=np.float64)
        bound = 8 * np.finfo(dtype).eps * s
    elif tol == TRANSCENDENTAL:
        rtol, atol = TRANSCENDENTAL_TOL[dtype]
        bound = atol + rtol * np.abs(reference)
    else:
        raise ValueError(f"unknown tolerance class {tol!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        units = np.where(err == 0, 0.0, err / bound)
    units = np.where(np.isnan(units), np.inf, units)
    worst = float(units.max())
    if worst <= 1:
        return Verdict(True, worst)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(units)), units.shape))
    return Verdict(False, worst, idx, f"error {err[idx]:.3g} at {idx} is {worst:.3g}x the "
                                      f"{tol} tolerance {bound[idx]:.3g} (value {actual[idx]!r}, "
                                      f"reference {reference[idx]!r})")
