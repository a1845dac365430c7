"""Keeping gradcheck inputs away from the points where an op is not differentiable.

Finite differences straddling a kink (relu at 0, max at a tie) measure nothing useful, so
DESIGN.md's policy moves inputs at least `MARGIN` away first. Each spec names its rule.
"""

from __future__ import annotations

import numpy as np

MARGIN = 1e-3


def away_from_zero(x: np.ndarray, margin: float = MARGIN) -> np.ndarray:
    """Values within `margin` of 0 pushed out to +-2 margin (dtype kept)."""
    pushed = np.where(np.abs(x) < margin, np.where(x >= 0, 2 * margin, -2 * margin), x)
    return pushed.astype(x.dtype)


def distinct(*arrays: np.ndarray, margin: float = MARGIN) -> list[np.ndarray]:
    """All values of all arrays replaced by a permuted grid that keeps their order (ties broken
    by position), so no two are closer than `margin`: max, sort and pooling have no ties."""
    flat = np.concatenate([a.reshape(-1) for a in arrays]) if arrays else np.zeros(0)
    if flat.size == 0:
        return list(arrays)
    ranks = np.empty(flat.size, dtype=np.int64)
    ranks[np.argsort(flat, kind="stable")] = np.arange(flat.size)
    lo, hi = float(flat.min()), float(flat.max())
    step = max((hi - lo) / max(flat.size - 1, 1), 4 * margin)
    grid = lo + ranks * step
    out, start = [], 0
    for a in arrays:
        out.append(grid[start:start + a.size].reshape(a.shape).astype(a.dtype))
        start += a.size
    return out


def away_from(x: np.ndarray, points, margin: float = MARGIN) -> np.ndarray:
    """Values within `margin` of any of `points` pushed to 2 margin beyond it (dtype kept)."""
    dtype = x.dtype
    for p in points:
        if p is None:
            continue
        near = np.abs(x - p) < margin
        x = np.where(near, np.where(x >= p, p + 2 * margin, p - 2 * margin), x)
    return np.asarray(x).astype(dtype)


def apply(rule: str | None, inputs: list, params: dict, grad: list[int]) -> list:
    """`inputs` made safe for a gradcheck under `rule` (see `Spec.kinks`)."""
    inputs = list(inputs)
    if rule is None:
        return inputs
    if rule == "zero":
        return [away_from_zero(a) if i in grad else a for i, a in enumerate(inputs)]
    if rule in ("distinct", "pair"):
        safe = distinct(*[inputs[i] for i in grad])
        for i, a in zip(grad, safe, strict=False):
            inputs[i] = a
        return inputs
    if rule == "bounds":
        points = (params.get("min"), params.get("max"))
        return [away_from(a, points) if i in grad else a for i, a in enumerate(inputs)]
    raise ValueError(f"unknown kink rule {rule!r}")
