"""Samplers of conv1d, the transposed convolutions (ndlite/ops/conv_more.py) and the group
and RMS norms (ndlite/ops/norms.py), registered under the kinds those files declare.

Geometry is drawn over every parameter (stride, padding as an int, 'same' and 'valid',
dilation, groups, output_padding below max(stride, dilation), unbatched inputs, bias or
none) and kept valid: every output size is at least 1.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from ..ops.conv_more import CONV1D, CONV_TRANSPOSE
from ..ops.norms import NORM
from .samplers import Case, arrays, sampler


def _int_or_tuple(draw, value: int):
    """An int, or PyTorch's 1-tuple of it, a quarter of the time."""
    return (value,) if draw(st.integers(0, 3)) == 0 else value


@sampler(CONV1D)
def _conv1d(spec, dtype):
    @st.composite
    def draw_case(draw):
        groups, cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
        k, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 2))
        mode = draw(st.sampled_from(["int", "int", "same", "valid"]))
        stride = 1 if mode == "same" else draw(st.integers(1, 3))
        padding = draw(st.integers(0, 2)) if mode == "int" else 0
        span = dilation * (k - 1) + 1
        low = 1 if mode == "same" else max(1, span - 2 * padding)
        length, n = draw(st.integers(low, low + 4)), draw(st.integers(1, 2))
        x = draw(arrays(dtype, (n, groups * cg, length)))
        if draw(st.booleans()):
            x = x[0]  # an unbatched (C, L) input
        inputs = [x, draw(arrays(dtype, (groups * og, cg, k)))]
        if draw(st.booleans()):
            inputs.append(draw(arrays(dtype, (groups * og,))))
        pad = padding if mode == "int" else mode
        params = dict(stride=_int_or_tuple(draw, stride),
                      padding=_int_or_tuple(draw, pad) if mode == "int" else pad,
                      dilation=_int_or_tuple(draw, dilation), groups=groups)
        return Case(inputs, params)

    return draw_case()


@st.composite
def conv_transpose_case(draw, dims: int):
    """(input shape, weight shape, params, output shape) of a valid transposed convolution."""
    groups, cg_in, cg_out = (draw(st.integers(1, 2)), draw(st.integers(1, 2)),
                             draw(st.integers(1, 2)))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(dims))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(dims))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(dims))
    output_padding = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in
                           zip(stride, dilation, strict=True))
    size = tuple(draw(st.integers(1, 4)) for _ in range(dims))
    # the output, (n - 1) s - 2 p + d (k - 1) + q + 1, has at least one element
    padding = tuple(draw(st.integers(0, min(2, ((n - 1) * s + d * (k - 1) + q) // 2)))
                    for n, s, d, k, q in zip(size, stride, dilation, kernel, output_padding,
                                             strict=True))
    out = tuple((n - 1) * s - 2 * p + d * (k - 1) + q + 1 for n, s, p, d, k, q in zip(
        size, stride, padding, dilation, kernel, output_padding, strict=True))
    n = draw(st.integers(1, 2))
    x_shape = (n, groups * cg_in) + size
    w_shape = (groups * cg_in, cg_out) + kernel
    params = dict(stride=stride, padding=padding, output_padding=output_padding,
                  groups=groups, dilation=dilation)
    if dims == 1 or all(len(set(v)) == 1 for v in params.values() if isinstance(v, tuple)):
        if draw(st.booleans()):  # ints, as PyTorch allows
            params = {k: v[0] if isinstance(v, tuple) else v for k, v in params.items()}
    return x_shape, w_shape, params, (n, groups * cg_out) + out


@sampler(CONV_TRANSPOSE)
def _conv_transpose(spec, dtype):
    dims = spec.params["dims"]

    @st.composite
    def draw_case(draw):
        x_shape, w_shape, params, out = draw(conv_transpose_case(dims))
        x = draw(arrays(dtype, x_shape))
        if draw(st.integers(0, 3)) == 0:
            x = x[0]  # an unbatched input
        inputs = [x, draw(arrays(dtype, w_shape))]
        if draw(st.booleans()):
            inputs.append(draw(arrays(dtype, (out[1],))))
        return Case(inputs, params)

    return draw_case()


def _spread(x: np.ndarray, axes: tuple, draw, dtype) -> np.ndarray:
    """x made well conditioned for normalizing over `axes`: its values there spread out (a
    spread small against the mean would make normalizing amplify float32 rounding)."""
    x = x - x.mean(axis=axes, keepdims=True) + np.linspace(-1, 1, x.size).reshape(x.shape)
    shift = draw(arrays(dtype, tuple(1 if i in axes else n for i, n in enumerate(x.shape)),
                        -0.5, 0.5))
    return (x + shift).astype(dtype)


def _group_case(draw, dtype):
    num_groups = draw(st.integers(1, 3))
    c = num_groups * draw(st.integers(1, 2))
    spatial = draw(st.sampled_from([(), (3,), (2, 2)]))
    n = draw(st.integers(1, 3))
    per_group = (c // num_groups) * int(np.prod(spatial))
    assume(per_group >= 2)
    x = draw(arrays(dtype, (n, c) + spatial))
    grouped = _spread(x.reshape(n, num_groups, per_group), (2,), draw, dtype)
    inputs = [grouped.reshape(x.shape)]
    affine = draw(st.sampled_from(["none", "weight", "both"]))
    if affine != "none":
        inputs.append(draw(arrays(dtype, (c,))))
    if affine == "both":
        inputs.append(draw(arrays(dtype, (c,))))

    def invoke(fn, ts, p):
        weight, bias = (list(ts[1:]) + [None, None])[:2]
        return fn(ts[0], p["num_groups"], weight, bias, eps=p["eps"])

    return Case(inputs, {"num_groups": num_groups, "eps": 1e-5}, invoke=invoke)


def _rms_case(draw, dtype):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    kept = draw(st.integers(1, len(shape)))
    normalized = shape[len(shape) - kept:]
    x = draw(arrays(dtype, shape))
    x = (x + np.where(x < 0, -0.5, 0.5)).astype(dtype)  # the root mean square stays >= 0.5
    inputs = [x]
    if draw(st.booleans()):
        inputs.append(draw(arrays(dtype, normalized)))
    eps = draw(st.sampled_from([None, 1e-6]))
    as_list = draw(st.booleans())

    def invoke(fn, ts, p):
        return fn(ts[0], p["normalized_shape"], ts[1] if len(ts) > 1 else None, eps=p["eps"])

    size = list(normalized) if as_list else (normalized[0] if kept == 1 else normalized)
    return Case(inputs, {"normalized_shape": size, "eps": eps}, invoke=invoke)


@sampler(NORM)
def _norm(spec, dtype):
    kind = spec.params["kind"]

    @st.composite
    def draw_case(draw):
        return _group_case(draw, dtype) if kind == "group" else _rms_case(draw, dtype)

    return draw_case()

