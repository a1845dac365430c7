"""Special functions composed from the primitives: the fallbacks of the FAST_PATHS entries
that are functions of one element (erf), to float64 accuracy, in the manner of fallbacks.py."""

from __future__ import annotations

import math


def erf(b, x):
    """erf to float64 accuracy (relative error < 2e-15) from primitives: below |x| = 2.5 the
    series 2/sqrt(pi) exp(-x^2) sum 2^k x^(2k+1) / (2k+1)!! (all terms positive, so nothing
    cancels; 40 terms), above it 1 - erfc(|x|) with erfc's continued fraction (40 levels)."""
    a = b.abs(x)
    small = b.minimum(a, 2.5)
    square = b.mul(small, small)
    term = total = small
    for k in range(1, 40):
        term = b.div(b.mul(term, b.mul(square, 2.0)), 2.0 * k + 1.0)
        total = b.add(total, term)
    series = b.mul(b.mul(total, b.exp(b.neg(square))), 2.0 / math.sqrt(math.pi))
    large = b.maximum(a, 2.5)
    fraction = large
    for k in range(40, 0, -1):
        fraction = b.add(large, b.div(k / 2.0, fraction))
    erfc = b.div(b.exp(b.neg(b.mul(large, large))), b.mul(fraction, math.sqrt(math.pi)))
    magnitude = b.where(b.lt(a, 2.5), series, b.sub(1.0, erfc))
    return b.where(b.lt(x, 0), b.neg(magnitude), b.where(b.eq(x, x), magnitude, x))
