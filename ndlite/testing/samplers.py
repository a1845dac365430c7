"""Hypothesis strategies that draw valid inputs for every op, one per kind of input
(`Spec.sample`, an object of ndlite.ops.samples).

A sampler draws a `Case`: NumPy input arrays, the op's keyword parameters, which inputs are
differentiable, and optionally how to call the op (for ops that take a list, like cat).
Shapes include 0-d and size-1 dims and mutually broadcastable pairs; values are hypothesis
floats (no NaN/inf, no subnormals, width 32 for float32) inside the spec's domain, so ties,
zeros and repeated values come up and shrink well; under sqrt(tiny), zero if the domain has 0.

Backend authors get these through `ndlite.testing`; a package adding ops adds its samplers
with `@sampler(their_kind)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..dtypes import HALF, as_dtype, finfo, float32, is_floating
from ..ops import samples

SAMPLERS: dict = {}  # ndlite.ops.samples.Sampler -> strategy factory
MAX_SIDE = 4


@dataclass
class Case:
    """One drawn example: inputs, params, which inputs get gradients, how to call."""

    inputs: list
    params: dict = field(default_factory=dict)
    grad: list | None = None  # indices of differentiable inputs (default: all float inputs)
    invoke: Callable | None = None  # invoke(fn, tensors, params) -> Tensor or tuple

    def differentiable(self) -> list[int]:
        if self.grad is not None:
            return self.grad
        return [i for i, a in enumerate(self.inputs) if is_floating(a.dtype)]

    def call(self, fn, tensors):
        if self.invoke is not None:
            return self.invoke(fn, tensors, self.params)
        return fn(*tensors, **self.params)


def sampler(kind: samples.Sampler):
    """Register a hypothesis strategy factory `f(spec, dtype) -> strategy of Case` for the
    inputs of `kind`."""

    def deco(fn):
        SAMPLERS[kind] = fn
        return fn

    return deco


def strategy(spec, dtype) -> st.SearchStrategy:
    """The strategy of Cases for an op's spec in `dtype` ("float32", "float64", "float16",
    "bfloat16")."""
    try:
        factory = SAMPLERS[spec.sample]
    except KeyError:
        raise KeyError(f"no strategy for {spec.sample!r}: register one with "
                       f"@sampler({spec.sample!r}); known: {list(SAMPLERS)}") from None
    return factory(spec, as_dtype(dtype))


# ---- building blocks --------------------------------------------------------------------------


def _inside(bound: float, dtype: np.dtype, up: bool) -> float:
    """`bound` rounded into the range to the nearest value `dtype` can hold (0.05 in float32)."""
    value = np.dtype(dtype).type(bound)
    if (up and value < bound) or (not up and value > bound):
        value = np.nextafter(value, np.dtype(dtype).type(np.inf if up else -np.inf))
    return float(value)


def floats(dtype: np.dtype, lo: float, hi: float) -> st.SearchStrategy:
    dtype = np.dtype(dtype)
    if dtype in HALF:  # values of the half inside [lo, hi], drawn as float32 and rounded
        lo, hi = _inside(lo, dtype, up=True), _inside(hi, dtype, up=False)
        return floats(float32, lo, hi).map(lambda v: _half_value(v, dtype))
    width = 32 if dtype == np.float32 else 64
    if width == 32:
        lo, hi = _inside(lo, dtype, up=True), _inside(hi, dtype, up=False)
    least = math.sqrt(float(finfo(dtype).tiny)) if lo <= 0.0 <= hi else 0.0  # DESIGN.md: CuPy
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False,
                     width=width).map(lambda v: v if abs(v) >= least else math.copysign(0.0, v))


def _half_value(value: float, dtype: np.dtype) -> float:
    """`value` rounded to the half `dtype` (monotone, so it stays inside bounds that the half
    holds), with a result below the half's smallest normal flushed to a signed zero: the
    kit draws no subnormals."""
    rounded = float(np.asarray(value, np.float32).astype(dtype))
    return rounded if abs(rounded) >= float(finfo(dtype).tiny) else math.copysign(0.0, value)


def arrays(dtype, shape, lo=-2.0, hi=2.0) -> st.SearchStrategy:
    """Arrays of `dtype` in [lo, hi]; a half (which hypothesis cannot build) is drawn as
    float32 values that the half holds exactly, then cast: the cast changes no value."""
    dtype = np.dtype(dtype)
    if dtype in HALF:
        drawn = hnp.arrays(float32, shape, elements=floats(dtype, lo, hi))
        return drawn.map(lambda a: a.astype(dtype))
    return hnp.arrays(dtype, shape, elements=floats(dtype, lo, hi))


def shapes(min_dims=0, max_dims=4, min_side=1, max_side=MAX_SIDE) -> st.SearchStrategy:
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def _domain(spec):
    return spec.domain


# ---- core samplers ----------------------------------------------------------------------------


@sampler(samples.UNARY)
def _unary(spec, dtype):
    lo, hi = _domain(spec)

    @st.composite
    def draw_case(draw):
        x = draw(arrays(dtype, draw(shapes()), lo, hi))
        return Case([x], dict(spec.params))

    return draw_case()


@sampler(samples.BINARY)
def _binary(spec, dtype):
    lo, hi = _domain(spec)

    @st.composite
    def draw_case(draw):
        pair = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                      max_side=MAX_SIDE))
        a_shape, b_shape = pair.input_shapes
        a = draw(arrays(dtype, a_shape, lo, hi))
        if "exponent" in spec.params:  # pow: a small real exponent, positive base
            e_lo, e_hi = spec.params["exponent"]
            b = draw(arrays(dtype, b_shape, e_lo, e_hi))
        elif "divisor_min" in spec.params:  # div: keep divisors away from zero
            m = spec.params["divisor_min"]
            b = draw(arrays(dtype, b_shape, m, hi))
            b = b * draw(hnp.arrays(np.int8, b_shape, elements=st.sampled_from([-1, 1])))
        else:
            b = draw(arrays(dtype, b_shape, lo, hi))
        return Case([a, b])

    return draw_case()


@sampler(samples.WHERE)
def _where(spec, dtype):
    @st.composite
    def draw_case(draw):
        triple = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3,
                                                        max_side=MAX_SIDE))
        c_shape, a_shape, b_shape = triple.input_shapes
        cond = draw(hnp.arrays(np.bool_, c_shape))
        return Case([cond, draw(arrays(dtype, a_shape)), draw(arrays(dtype, b_shape))],
                    grad=[1, 2])

    return draw_case()


@sampler(samples.REDUCE)
def _reduce(spec, dtype):
    p = spec.params
    lo, hi = _domain(spec)

    @st.composite
    def draw_case(draw):
        min_dims = 1 if (p.get("dim_required") or p.get("single_dim")) else 0
        shape = draw(shapes(min_dims=min_dims))
        x = draw(arrays(dtype, shape, lo, hi))
        ndim = len(shape)
        if p.get("single_dim"):
            dim = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))
        elif p.get("dim_required"):
            dim = draw(st.integers(-ndim, ndim - 1))
        else:
            choices = [st.none()]
            if ndim:
                choices.append(st.integers(-ndim, ndim - 1))
                choices.append(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                                        unique=True).map(tuple))
            dim = draw(st.one_of(*choices))
        if p.get("min_count"):
            axes = range(ndim) if dim is None else ([dim] if isinstance(dim, int) else dim)
            count = int(np.prod([shape[a] for a in axes])) if ndim else 1
            if count < p["min_count"]:
                x = np.concatenate([x.reshape(-1), x.reshape(-1) + 0.5]).astype(dtype)
                return Case([x], {"dim": None, "keepdim": False})
        return Case([x], {"dim": dim, "keepdim": draw(st.booleans())})

    return draw_case()


@sampler(samples.MATMUL)
def _matmul(spec, dtype):
    nd = spec.params.get("ndim")

    @st.composite
    def draw_case(draw):
        n, k, m = (draw(st.integers(1, MAX_SIDE)) for _ in range(3))
        a_vec = b_vec = False
        if nd is None:  # any mix of vectors, matrices and broadcast batches
            batches = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0,
                                                             max_dims=2, max_side=3))
            a_batch, b_batch = batches.input_shapes
            a_vec, b_vec = draw(st.booleans()), draw(st.booleans())
        elif nd == (1, 1):
            a_batch = b_batch = ()
            a_vec = b_vec = True
        elif nd == (3, 3):
            a_batch = b_batch = (draw(st.integers(1, 3)),)
        else:
            a_batch = b_batch = ()
        a_shape = (k,) if a_vec else a_batch + (n, k)
        b_shape = (k,) if b_vec else b_batch + (k, m)
        return Case([draw(arrays(dtype, a_shape)), draw(arrays(dtype, b_shape))])

    return draw_case()


@sampler(samples.LINEAR)
def _linear(spec, dtype):
    @st.composite
    def draw_case(draw):
        lead = draw(shapes(min_dims=0, max_dims=2))
        n_in, n_out = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        inputs = [draw(arrays(dtype, lead + (n_in,))), draw(arrays(dtype, (n_out, n_in)))]
        if draw(st.booleans()):
            inputs.append(draw(arrays(dtype, (n_out,))))
        return Case(inputs)

    return draw_case()


@sampler(samples.RESHAPE)
def _reshape(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes())
        x = draw(arrays(dtype, shape))
        n = x.size
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        first = draw(st.sampled_from(divisors))
        target = draw(st.sampled_from([(n,), (first, n // first), (first, -1),
                                       (1, first, n // first, 1)]))
        return Case([x], {"shape": target}, invoke=lambda fn, ts, p: fn(ts[0], p["shape"]))

    return draw_case()


@sampler(samples.PERMUTE)
def _permute(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes())
        dims = draw(st.permutations(range(len(shape))))
        return Case([draw(arrays(dtype, shape))], {"dims": tuple(dims)},
                    invoke=lambda fn, ts, p: fn(ts[0], p["dims"]))

    return draw_case()


@sampler(samples.TRANSPOSE)
def _transpose(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1))
        nd = len(shape)
        d0, d1 = draw(st.integers(-nd, nd - 1)), draw(st.integers(-nd, nd - 1))
        return Case([draw(arrays(dtype, shape))], {"dim0": d0, "dim1": d1})

    return draw_case()


@sampler(samples.EXPAND)
def _expand(spec, dtype):
    @st.composite
    def draw_case(draw):
        pair = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4,
                                                      max_side=MAX_SIDE))
        shape = pair.input_shapes[0]
        return Case([draw(arrays(dtype, shape))], {"sizes": pair.result_shape},
                    invoke=lambda fn, ts, p: fn(ts[0], p["sizes"]))

    return draw_case()


@sampler(samples.SQUEEZE)
def _squeeze(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_side=1, max_side=2))
        nd = len(shape)
        dim = draw(st.one_of(st.none(), st.integers(-nd, nd - 1))) if nd else None
        return Case([draw(arrays(dtype, shape))], {"dim": dim})

    return draw_case()


@sampler(samples.UNSQUEEZE)
def _unsqueeze(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(max_dims=3))
        nd = len(shape) + 1
        return Case([draw(arrays(dtype, shape))], {"dim": draw(st.integers(-nd, nd - 1))})

    return draw_case()


@sampler(samples.FLATTEN)
def _flatten(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1))
        nd = len(shape)
        a, b = sorted((draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1))))
        return Case([draw(arrays(dtype, shape))], {"start_dim": a, "end_dim": b})

    return draw_case()


@sampler(samples.CAT)
def _cat(spec, dtype):
    same = spec.params.get("same_shape", False)

    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1, max_dims=3))
        nd = len(shape)
        dim = draw(st.integers(-nd, nd - 1)) if not same else draw(st.integers(-nd - 1, nd))
        count = draw(st.integers(1, 3))
        inputs = []
        for _ in range(count):
            s = list(shape)
            if not same:
                s[dim] = draw(st.integers(0 if count > 1 else 1, MAX_SIDE))
            inputs.append(draw(arrays(dtype, tuple(s))))
        return Case(inputs, {"dim": dim}, invoke=lambda fn, ts, p: fn(list(ts), dim=p["dim"]))

    return draw_case()


@sampler(samples.SPLIT)
def _split(spec, dtype):
    chunks = spec.params.get("chunks", False)

    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1))
        nd = len(shape)
        dim = draw(st.integers(-nd, nd - 1))
        n = shape[dim]
        if chunks:
            arg = draw(st.integers(1, n + 1))
        elif draw(st.booleans()):
            arg = draw(st.integers(1, n + 1))
        else:
            cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
            arg = [b - a for a, b in zip([0] + cuts, cuts + [n], strict=False)]
        return Case([draw(arrays(dtype, shape))], {"arg": arg, "dim": dim},
                    invoke=lambda fn, ts, p: fn(ts[0], p["arg"], p["dim"]))

    return draw_case()


@sampler(samples.PAD)
def _pad(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1, max_dims=3))
        k = draw(st.integers(1, len(shape)))
        widths = []
        for i in range(k):  # negative widths crop, but every dim keeps at least one element
            n = shape[-1 - i]
            lo = draw(st.integers(-(n - 1), 2))
            hi = draw(st.integers(max(1 - n - lo, -(n - 1)), 2))
            widths += [lo, hi]
        value = draw(st.sampled_from([0.0, 1.5]))
        return Case([draw(arrays(dtype, shape))], {"pad": tuple(widths), "value": value},
                    invoke=lambda fn, ts, p: fn(ts[0], p["pad"], value=p["value"]))

    return draw_case()
