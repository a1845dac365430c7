"""Samplers of the ops added for PyTorch programs (issue 13): einsum equations with operands
that fit, sorts (an array, a dim, a direction) and scans (an array and a dim)."""

from __future__ import annotations

from hypothesis import strategies as st

from ..ops import samples
from .samplers import Case, arrays, sampler, shapes

#: equations attention, bilinear and linear-algebra code use, with the sizes of their letters
EQUATIONS = [
    "ij,jk->ik", "bij,bjk->bik", "bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd", "ii", "ii->i",
    "i,j->ij", "ij->ji", "ij->", "bi,ij,bj->b", "...ij,...jk->...ik", "ij,ij->i", "i,i->",
    "bn,anm,bm->ba", "ij,j->i",
]


@sampler(samples.EINSUM)
def _einsum(spec, dtype):
    lo, hi = spec.domain

    @st.composite
    def draw_case(draw):
        equation = draw(st.sampled_from(EQUATIONS))
        letters = sorted(set(equation) - set(",->."))
        size = {c: draw(st.integers(1, 3)) for c in letters}
        batch = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
        terms = equation.partition("->")[0].split(",")
        inputs = []
        for k, term in enumerate(terms):
            lead = batch if term.startswith("...") and k == 0 else ()
            shape = lead + tuple(size[c] for c in term.replace("...", ""))
            inputs.append(draw(arrays(dtype, shape, lo, hi)))
        return Case(inputs, {"equation": equation})

    return draw_case()


@sampler(samples.SORT)
def _sort(spec, dtype):
    lo, hi = spec.domain

    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1, max_dims=3))
        dim = draw(st.integers(-len(shape), len(shape) - 1))
        x = draw(arrays(dtype, shape, lo, hi))
        return Case([x], {"dim": dim, "descending": draw(st.booleans())})

    return draw_case()


@sampler(samples.SCAN)
def _scan(spec, dtype):
    lo, hi = spec.domain

    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=0, max_dims=3))
        n = max(len(shape), 1)
        return Case([draw(arrays(dtype, shape, lo, hi))], {"dim": draw(st.integers(-n, n - 1))})

    return draw_case()
