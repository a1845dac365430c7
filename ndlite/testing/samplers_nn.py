"""Hypothesis samplers for the neural-network ops (conv, pooling, softmax, losses, dropout,
batch norm), registered with `@sampler` under the names their specs use.

Geometry is drawn over every parameter the op has (non-square kernels and inputs, stride,
padding as ints, pairs, 'same' and 'valid', dilation, groups, ceil_mode, count_include_pad,
every reduction, ignore_index, label smoothing, class weights) and kept valid: every output
size is at least 1 and no pooling window holds only padding.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ndlite

from ..device.fallbacks import conv_output_size, empty_windows, pool_output_size
from ..ops import samples
from .samplers import Case, arrays, sampler, shapes

REDUCTION = st.sampled_from(["mean", "sum", "none"])


def _pair_or_int(draw, pair):
    """A (h, w) pair, passed as an int when both are equal half of the time."""
    if pair[0] == pair[1] and draw(st.booleans()):
        return pair[0]
    return pair


# ---- convolution ------------------------------------------------------------------------------


@st.composite
def conv_case(draw, dtype):
    """(x shape, weight shape, params, output shape) of a valid conv2d."""
    groups = draw(st.integers(1, 2))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    mode = draw(st.sampled_from(["int", "int", "same", "valid"]))
    stride = (1, 1) if mode == "same" else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2))) if mode == "int" else (0, 0)
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    low = [1 if mode == "same" else max(1, s - 2 * p) for s, p in zip(spans, padding, strict=True)]
    h, w = draw(st.integers(low[0], low[0] + 4)), draw(st.integers(low[1], low[1] + 4))
    n = draw(st.integers(1, 2))
    x_shape = (n, groups * cg, h, w)
    w_shape = (groups * og, cg) + kernel
    if mode == "same":
        out = (n, groups * og, h, w)
        pad_param = "same"
    else:
        out = (n, groups * og) + tuple(conv_output_size(s, k, st_, p, d) for s, k, st_, p, d in
                                       zip((h, w), kernel, stride, padding, dilation, strict=True))
        pad_param = "valid" if mode == "valid" else _pair_or_int(draw, padding)
    params = dict(stride=_pair_or_int(draw, stride), padding=pad_param,
                  dilation=_pair_or_int(draw, dilation), groups=groups)
    return x_shape, w_shape, params, out


@sampler(samples.CONV2D)
def _conv2d(spec, dtype):
    @st.composite
    def draw_case(draw):
        x_shape, w_shape, params, _ = draw(conv_case(dtype))
        inputs = [draw(arrays(dtype, x_shape)), draw(arrays(dtype, w_shape))]
        if draw(st.booleans()):
            inputs.append(draw(arrays(dtype, (w_shape[0],))))
        return Case(inputs, params)

    return draw_case()


@sampler(samples.CONV2D_GRAD)
def _conv2d_grad(spec, dtype):
    which = spec.params["which"]

    @st.composite
    def draw_case(draw):
        x_shape, w_shape, params, out = draw(conv_case(dtype))
        assume(params["padding"] != "same")
        padding = 0 if params["padding"] == "valid" else params["padding"]
        geometry = dict(params, padding=padding)
        grad_output = draw(arrays(dtype, out))
        if which == "input":
            return Case([grad_output, draw(arrays(dtype, w_shape))],
                        dict(geometry, input_shape=x_shape))
        return Case([draw(arrays(dtype, x_shape)), grad_output],
                    dict(geometry, weight_shape=w_shape))

    return draw_case()


# ---- pooling ----------------------------------------------------------------------------------


@st.composite
def pool_case(draw, dilation: bool):
    """(input shape, params, output shape) of a valid 2-D pooling."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = draw(st.one_of(st.none(), st.tuples(st.integers(1, 3), st.integers(1, 3))))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilation else (1, 1)
    padding = (draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2)))
    ceil_mode = draw(st.booleans())
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dil, strict=True)]
    h = draw(st.integers(max(1, spans[0] - 2 * padding[0]), 6))
    w = draw(st.integers(max(1, spans[1] - 2 * padding[1]), 6))
    steps = kernel if stride is None else stride
    out = []
    for size, k, s, p, d in zip((h, w), kernel, steps, padding, dil, strict=True):
        o = pool_output_size(size, k, s, p, d, ceil_mode)
        assume(o >= 1 and not empty_windows(size, k, s, p, d, o))
        out.append(o)
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    params = dict(kernel_size=_pair_or_int(draw, kernel),
                  stride=None if stride is None else _pair_or_int(draw, stride),
                  padding=_pair_or_int(draw, padding), ceil_mode=ceil_mode)
    if dilation:
        params["dilation"] = _pair_or_int(draw, dil)
    return (n, c, h, w), params, (n, c) + tuple(out)


def _max_pool_indices(x: np.ndarray, params: dict) -> np.ndarray:
    """The indices max_pool2d returns, from the NumPy backend (the reference)."""
    with ndlite.no_grad():
        _, index = ndlite.nn.functional.max_pool2d(ndlite.tensor(x, backend="numpy"),
                                                   return_indices=True, **params)
    return index.numpy()


@sampler(samples.POOL2D)
def _pool2d(spec, dtype):
    kind = spec.params["kind"]

    @st.composite
    def draw_case(draw):
        shape, params, out = draw(pool_case(dilation=kind.startswith("max")))
        if kind == "max":
            x = draw(arrays(dtype, shape))
            if draw(st.booleans()):
                return Case([x[0]], params)  # an unbatched (C, H, W) input
            return Case([x], params)
        if kind == "avg":
            params["count_include_pad"] = draw(st.booleans())
            return Case([draw(arrays(dtype, shape))], params)
        if kind == "max_grad":
            grid = np.random.default_rng(draw(st.integers(0, 2**16))).permutation(
                int(np.prod(shape))).reshape(shape).astype(np.float64)
            indices = _max_pool_indices(grid, params)
            return Case([draw(arrays(dtype, out)), indices], dict(params, input_shape=shape),
                        grad=[0])
        params["count_include_pad"] = draw(st.booleans())  # avg_grad
        return Case([draw(arrays(dtype, out))], dict(params, input_shape=shape))

    return draw_case()


@sampler(samples.ADAPTIVE_POOL2D)
def _adaptive_pool2d(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 6)),
                 draw(st.integers(1, 6)))
        size = draw(st.one_of(st.integers(1, 4),
                              st.tuples(st.one_of(st.none(), st.integers(1, 4)),
                                        st.integers(1, 7))))
        x = draw(arrays(dtype, shape))
        return Case([x[0] if draw(st.booleans()) else x], {"output_size": size})

    return draw_case()


# ---- activations ------------------------------------------------------------------------------


@sampler(samples.SOFTMAX)
def _softmax(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1, max_dims=3))
        dim = draw(st.integers(-len(shape), len(shape) - 1))
        return Case([draw(arrays(dtype, shape, -4.0, 4.0))], {"dim": dim})

    return draw_case()


@sampler(samples.GELU)
def _gelu(spec, dtype):
    @st.composite
    def draw_case(draw):
        x = draw(arrays(dtype, draw(shapes()), *spec.domain))
        return Case([x], {"approximate": draw(st.sampled_from(["none", "tanh"]))})

    return draw_case()


@sampler(samples.DROPOUT)
def _dropout(spec, dtype):
    @st.composite
    def draw_case(draw):
        x = draw(arrays(dtype, draw(shapes())))
        return Case([x], {"p": draw(st.sampled_from([0.0, 0.2, 0.5, 0.9])),
                          "seed": draw(st.integers(0, 100)), "training": draw(st.booleans())})

    return draw_case()


@sampler(samples.BATCH_NORM)
def _batch_norm(spec, dtype):
    @st.composite
    def draw_case(draw):
        c = draw(st.integers(1, 3))
        spatial = draw(st.sampled_from([(), (3,), (2, 2)]))
        n = draw(st.integers(2 if not spatial else 1, 3))
        x = draw(arrays(dtype, (n, c) + spatial))
        # well conditioned: each channel spread out (a spread small against the mean would
        # make normalizing amplify float32 rounding beyond any fair tolerance)
        axes = (0,) + tuple(range(2, x.ndim))
        x = x - x.mean(axis=axes, keepdims=True) + np.linspace(-1, 1, x.size).reshape(x.shape)
        x = (x + draw(arrays(dtype, (1, c) + (1,) * len(spatial), -0.5, 0.5))).astype(dtype)
        inputs = [x]
        affine = draw(st.booleans())
        if affine:
            inputs += [draw(arrays(dtype, (c,))), draw(arrays(dtype, (c,)))]

        def invoke(fn, ts, p):
            weight, bias = (ts[1], ts[2]) if len(ts) == 3 else (None, None)
            return fn(ts[0], None, None, weight, bias, training=True, eps=p["eps"])

        return Case(inputs, {"eps": 1e-5}, invoke=invoke)

    return draw_case()


# ---- losses -----------------------------------------------------------------------------------


@st.composite
def class_case(draw, dtype):
    """(input, target, params) for a class-index loss; at least one target is not ignored."""
    classes = draw(st.integers(1, 4))
    layout = draw(st.sampled_from(["batch", "batch", "spatial", "single"]))
    n = draw(st.integers(1, 3))
    if layout == "single":
        shape, tshape = (classes,), ()
    elif layout == "spatial":
        d = draw(st.integers(1, 3))
        shape, tshape = (n, classes, d), (n, d)
    else:
        shape, tshape = (n, classes), (n,)
    ignore_index = draw(st.sampled_from([-100, 0, 1]))
    labels = draw(hnp.arrays(np.int64, tshape, elements=st.integers(0, classes - 1)))
    mask = draw(hnp.arrays(np.bool_, tshape))
    target = np.where(mask, ignore_index, labels).astype(np.int64)
    assume(np.any(target != ignore_index))
    params = {"ignore_index": ignore_index, "reduction": draw(REDUCTION)}
    inputs = [draw(arrays(dtype, shape, -3.0, 3.0)), target]
    if draw(st.booleans()):
        inputs.append(draw(arrays(dtype, (classes,), 0.5, 2.0)))
    return inputs, params


def _class_invoke(fn, ts, p):
    weight = ts[2] if len(ts) > 2 else None
    return fn(ts[0], ts[1], weight=weight, **p)


@sampler(samples.NLL_LOSS)
def _nll_loss(spec, dtype):
    @st.composite
    def draw_case(draw):
        inputs, params = draw(class_case(dtype))
        return Case(inputs, params, grad=[0] + ([2] if len(inputs) > 2 else []),
                    invoke=_class_invoke)

    return draw_case()


@sampler(samples.CROSS_ENTROPY)
def _cross_entropy(spec, dtype):
    @st.composite
    def draw_case(draw):
        inputs, params = draw(class_case(dtype))
        params["label_smoothing"] = draw(st.sampled_from([0.0, 0.0, 0.1, 0.4]))
        if draw(st.booleans()):  # class probabilities instead of indices
            x = inputs[0]
            probs = draw(arrays(dtype, x.shape, 0.0, 1.0))
            inputs[1] = probs
            del params["ignore_index"]
        return Case(inputs, params, grad=[0] + ([2] if len(inputs) > 2 else []),
                    invoke=_class_invoke)

    return draw_case()


@sampler(samples.REGRESSION_LOSS)
def _regression_loss(spec, dtype):
    @st.composite
    def draw_case(draw):
        shape = draw(shapes(max_dims=3))
        return Case([draw(arrays(dtype, shape)), draw(arrays(dtype, shape))],
                    {"reduction": draw(REDUCTION)})

    return draw_case()


@sampler(samples.BINARY_LOSS)
def _binary_loss(spec, dtype):
    logits = spec.params.get("logits", False)

    @st.composite
    def draw_case(draw):
        shape = draw(shapes(min_dims=1, max_dims=3))
        lo, hi = (-3.0, 3.0) if logits else spec.domain
        # targets away from 0 and 1: a finite-difference step must stay inside [0, 1], which
        # binary_cross_entropy checks
        inputs = [draw(arrays(dtype, shape, lo, hi)), draw(arrays(dtype, shape, 0.01, 0.99))]
        names = []
        if draw(st.booleans()):
            inputs.append(draw(arrays(dtype, draw(st.sampled_from([shape, shape[-1:]])),
                                      0.5, 2.0)))
            names.append("weight")
        if logits and draw(st.booleans()):
            inputs.append(draw(arrays(dtype, shape[-1:], 0.5, 3.0)))
            names.append("pos_weight")

        def invoke(fn, ts, p):
            extra = dict(zip(names, ts[2:], strict=True))
            return fn(ts[0], ts[1], reduction=p["reduction"], **extra)

        return Case(inputs, {"reduction": draw(REDUCTION)}, invoke=invoke)

    return draw_case()
