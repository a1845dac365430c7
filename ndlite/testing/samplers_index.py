"""Hypothesis strategies for the indexing ops: keys for getitem / setitem (basic entries,
integer arrays, masks), gather, scatter_add and take."""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ndlite

from ..ops import samples
from .samplers import MAX_SIDE, Case, arrays, sampler, shapes


def _index_key(draw, shape, advanced: bool):
    """A key for `shape`: basic entries, and with `advanced` integer lists/arrays and masks."""
    key, dim = [], 0
    nd = len(shape)
    while dim < nd:
        n = shape[dim]
        options = ["int", "slice", "none", "stop"]
        if advanced:
            options += ["array", "array", "mask"]
        kind = draw(st.sampled_from(options))
        if kind == "stop":
            break
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.one_of(st.none(), st.sampled_from([1, 2, -1, -2])))
            key.append(slice(start, stop, step))
        elif kind == "none":
            key.append(None)
            continue
        elif kind == "array":
            size = draw(st.integers(1, 3))
            key.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=size,
                                              max_size=size)), dtype=np.int64))
        else:
            key.append(draw(hnp.arrays(np.bool_, (n,))))
        dim += 1
    if draw(st.booleans()):
        # an Ellipsis that fills no dims can go anywhere; otherwise it must come last, where
        # it stands for the dims the key does not reach
        key.insert(draw(st.integers(0, len(key))) if dim == nd else len(key), Ellipsis)
    arrays_ = [k for k in key if isinstance(k, np.ndarray) and k.dtype != np.bool_]
    masks = [k for k in key if isinstance(k, np.ndarray) and k.dtype == np.bool_]
    if arrays_ or masks:  # all integer index arrays must broadcast together
        sizes = {a.shape[0] for a in arrays_} | {int(m.sum()) for m in masks}
        if len(sizes) > 1:
            target = min(sizes)
            key = [k[:target] if isinstance(k, np.ndarray) and k.dtype != np.bool_ else k
                   for k in key]
            key = [(_limit_mask(k, target) if isinstance(k, np.ndarray) and k.dtype == np.bool_
                    else k) for k in key]
    return tuple(key)


def _limit_mask(mask, count):
    out = np.zeros_like(mask)
    out[np.flatnonzero(mask)[:count]] = True
    return out


@sampler(samples.GETITEM)
def _getitem(spec, dtype):
    advanced = spec.params.get("advanced", False)

    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1))
        key = _index_key(draw, shape, advanced)
        return Case([draw(arrays(dtype, shape))], {"key": key})

    return draw_case()


@sampler(samples.INDEX_PUT)
def _index_put(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1))
        key = _index_key(draw, shape, advanced=draw(st.booleans()))
        # the positions x[key] writes, in PyTorch's order of dims (ndlite's own indexing)
        written = ndlite.tensor(np.arange(int(np.prod(shape))).reshape(shape))[key].numpy()
        # a position written twice keeps one of the values: its gradient is not defined
        assume(np.unique(written).size == written.size)
        target = written.shape
        vshape = draw(st.sampled_from([target, target[1:], ()]))
        return Case([draw(arrays(dtype, shape)), draw(arrays(dtype, vshape))], {"key": key})

    return draw_case()


@sampler(samples.GATHER)
def _gather(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1))
        nd = len(shape)
        axis = draw(st.integers(0, nd - 1))
        ishape = tuple(draw(st.integers(1, MAX_SIDE)) if d == axis else
                       draw(st.sampled_from([1, shape[d]])) for d in range(nd))
        index = draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, shape[axis] - 1)))
        return Case([draw(arrays(dtype, shape)), index], {"dim": axis}, grad=[0],
                    invoke=lambda fn, ts, p: fn(ts[0], p["dim"], ts[1]))

    return draw_case()


@sampler(samples.SCATTER_ADD)
def _scatter_add(spec, dtype):
    @st.composite
    def draw_case(draw):
        vshape = draw(shapes(min_dims=1))
        nd = len(vshape)
        axis = draw(st.integers(0, nd - 1))
        size = draw(st.integers(1, MAX_SIDE))
        ishape = tuple(vshape[d] if d == axis else draw(st.sampled_from([1, vshape[d]]))
                       for d in range(nd))
        index = draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, size - 1)))
        return Case([index, draw(arrays(dtype, vshape))], {"dim": axis, "size": size},
                    grad=[1])

    return draw_case()


@sampler(samples.TAKE)
def _take(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1))
        dim = draw(st.integers(-len(shape), len(shape) - 1))
        n = shape[dim]
        index = np.array(draw(st.lists(st.integers(0, n - 1), max_size=5)), dtype=np.int64)
        return Case([draw(arrays(dtype, shape)), index], {"dim": dim}, grad=[0],
                    invoke=lambda fn, ts, p: fn(ts[0], p["dim"], ts[1]))

    return draw_case()
