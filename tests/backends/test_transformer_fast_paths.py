"""The transformer fast paths (protocol.FAST_PATHS: embedding_grad, layer_norm(_grad),
causal_softmax(_grad)) on every available backend (numpy, opencl; cupy skipped without a GPU):
each against float64 NumPy math (the tolerance policy), against the backend's own fallback
(ndlite/device/transformer_fallbacks.py; bitwise where the sum order is the fallback's), and
against itself run to run (bitwise). Then the ops that use them: embedding's gradient with
heavily repeated indices, layer_norm and causal attention forward and backward, and their
second derivatives (composed while create_graph builds a graph) by finite differences.

On OpenCL the work-group trees of the row kernels are also run with forced group sizes (PoCL
on a CPU otherwise uses one item per group). The CuPy block trees run on a GPU only.
"""

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite.creation import generator
from ndlite.device import transformer_fallbacks as tfb
from ndlite.device.protocol import Backend
from ndlite.testing.gradcheck import gradcheck, gradgradcheck
from ndlite.testing.tolerance import judge

FLOATS = ("float32", "float64")
#: a segment at most this long is one chunk on the GPU backends: the fallback's order exactly
CHUNK = 32


def fallback(b, name):
    """The contract's composed fallback of fast path `name`, bound to backend `b`."""
    return getattr(Backend, name).__get__(b)


def dtypes(b):
    return [d for d in FLOATS if np.dtype(d) in b.dtypes]


def host(b, x):
    return None if x is None else b.to_numpy(x)


def dev(b, a):
    return None if a is None else b.from_numpy(np.ascontiguousarray(a))


def close(got, ref, dtype, roundings, what, terms=0.0):
    """|got - ref| within the policy's transcendental bound, S the array's largest magnitude
    plus the element's own (normalizations: errors scale with the row, not the element) plus
    `terms`, the size of what a result is the difference of."""
    scale = np.abs(ref) + (np.abs(ref).max() if ref.size else 0.0) + terms
    verdict = judge(got, ref, "transcendental", dtype, scale=scale, roundings=roundings)
    assert verdict.ok, f"{what}: {verdict.message}"


def same_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    nan = np.isnan(got)
    assert np.array_equal(nan, np.isnan(want)), what
    bits = np.uint32 if got.dtype == np.float32 else np.uint64
    assert np.array_equal(got[~nan].view(bits), want[~nan].view(bits)), what


# ---- embedding_grad ---------------------------------------------------------------------------

# (positions, width, rows, distinct indices drawn): the GPT's 64*256 positions over a vocab of
# 65, everything on one row, odd widths, one row, one position, rows nobody names, empties
SEGMENTS = [(16384, 37, 65, 65), (5000, 3, 4, 1), (300, 385, 100, 100), (40, 33, 1, 1),
            (1, 5, 3, 3), (31, 2, 7, 7), (0, 4, 3, 3), (6, 0, 3, 3), (8, 4, 0, 0)]


@pytest.mark.parametrize("n,d,rows,top", SEGMENTS, ids=[str(s) for s in SEGMENTS])
def test_embedding_grad_sums_each_row_in_a_fixed_order(backend, n, d, rows, top):
    b = backend
    r = np.random.default_rng(n + d)
    for dtype in dtypes(b):
        grad = r.standard_normal((n, d)).astype(dtype)
        index = r.integers(0, max(top, 1), n).astype(np.int64) if rows else \
            np.zeros(0, np.int64)
        if not rows and n:
            continue
        g, i = dev(b, grad), dev(b, index)
        got = host(b, b.embedding_grad(g, i, rows))
        assert got.shape == (rows, d) and got.dtype == grad.dtype
        want = np.zeros((rows, d))
        np.add.at(want, index, grad.astype(np.float64))
        size = np.zeros((rows, d))
        np.add.at(size, index, np.abs(grad.astype(np.float64)))
        count = int(np.bincount(index, minlength=rows).max(initial=0))
        verdict = judge(got, want, "scaled", dtype, scale=size, roundings=count)
        assert verdict.ok, verdict.message
        composed = host(b, fallback(b, "embedding_grad")(g, i, rows))
        if count <= CHUNK:
            same_bits(got, composed, "one chunk per row: the fallback's sum")
        same_bits(host(b, b.embedding_grad(g, i, rows)), got, "run to run")


@pytest.mark.parametrize("n,d,rows,top", SEGMENTS[:4], ids=[str(s) for s in SEGMENTS[:4]])
def test_opencl_embedding_grad_takes_either_path_to_the_same_sums(backend, n, d, rows, top,
                                                                   monkeypatch):
    """OpenCL: on a GPU few rows walk every position on the device (work-groups over the
    columns, some items past the last column); else the host-sorted segment sum. Each against
    float64, and the walk's sums in position order: a float64 sequential sum rounded as it goes
    in float32 is what it must give, bit for bit."""
    b = backend
    if not b.name.startswith("opencl"):
        pytest.skip("OpenCL's two embedding_grad paths")
    from ndlite_opencl import transformer

    r = np.random.default_rng(n)
    grad = r.standard_normal((n, d)).astype(np.float32)
    index = r.integers(0, top, n).astype(np.int64)
    monkeypatch.setattr(b, "is_gpu", True)  # the walk, as on a GPU, wherever the tests run
    walked = []
    kernel = transformer._kernel
    monkeypatch.setattr(transformer, "_kernel",
                        lambda be, name, *a: walked.append(name) or kernel(be, name, *a))
    scan = host(b, b.embedding_grad(dev(b, grad), dev(b, index), rows))
    assert walked == ["embedding_rows"]
    monkeypatch.setattr(b, "is_gpu", False)
    sorted_sum = host(b, b.embedding_grad(dev(b, grad), dev(b, index), rows))
    assert "segment_chunks" in walked
    want, size = np.zeros((rows, d)), np.zeros((rows, d))
    np.add.at(want, index, grad.astype(np.float64))
    np.add.at(size, index, np.abs(grad.astype(np.float64)))
    count = int(np.bincount(index, minlength=rows).max())
    for got in (scan, sorted_sum):
        verdict = judge(got, want, "scaled", np.float32, scale=size, roundings=count)
        assert verdict.ok, verdict.message
    in_order = np.zeros((rows, d), np.float32)
    for p in range(n):  # position by position, each add rounded to float32
        in_order[index[p]] += grad[p]
    same_bits(scan, in_order, "the walk adds the positions in order")


def test_embedding_backward_with_repeated_tokens(backend):
    b = backend
    r = np.random.default_rng(3)
    tokens = r.integers(0, 5, (64, 40))  # thousands of positions on 5 rows of 12
    weight = r.standard_normal((12, 24)).astype(np.float32)
    g = r.standard_normal((64, 40, 24)).astype(np.float32)
    w = ndlite.tensor(weight, backend=b, requires_grad=True)
    out = F.embedding(ndlite.tensor(tokens, backend=b), w, padding_idx=2)
    (out * ndlite.tensor(g, backend=b)).sum().backward()
    want = np.zeros((12, 24))
    np.add.at(want, tokens.reshape(-1), g.reshape(-1, 24).astype(np.float64))
    want[2] = 0
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-4, atol=1e-3)
    first = w.grad.numpy().copy()
    w.grad = None
    out = F.embedding(ndlite.tensor(tokens, backend=b), w, padding_idx=2)
    (out * ndlite.tensor(g, backend=b)).sum().backward()
    same_bits(w.grad.numpy(), first, "embedding backward run to run")


def test_embedding_checks_its_indices(backend):
    w = ndlite.tensor(np.zeros((3, 2), np.float32), backend=backend, requires_grad=True)
    for bad in ([[0, 3]], [-1]):
        with pytest.raises(IndexError, match="embedding: index out of range"):
            F.embedding(ndlite.tensor(bad, backend=backend), w)


# ---- layer_norm -------------------------------------------------------------------------------

NORM_SHAPES = [(7, 33), (1, 1), (1, 385), (64, 384), (300, 5), (0, 5)]


def _layer_norm64(x, w, bias, g, eps=1e-5):
    x = x.astype(np.float64)
    mean = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    y = xhat * (1 if w is None else w) + (0 if bias is None else bias)
    gw = g * (1 if w is None else w)
    gx = rstd * (gw - gw.mean(1, keepdims=True) - xhat * (gw * xhat).mean(1, keepdims=True))
    # grad_x is a difference of terms of size rstd * |gw|: a row of equal values (rstd huge,
    # xhat 0) leaves it exactly 0 in exact arithmetic but rounding of the mean shows, scaled
    terms = rstd * (np.abs(gw) + np.abs(gw).mean(1, keepdims=True))
    return (y, mean[:, 0], rstd[:, 0]), (gx, (g * xhat).sum(0), g.sum(0)), terms


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=[str(s) for s in NORM_SHAPES])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_and_backward(backend, shape, affine):
    b = backend
    r = np.random.default_rng(shape[0] * 7 + shape[1])
    for dtype in dtypes(b):
        x = (r.standard_normal(shape) * 3 + 2).astype(dtype)
        w, bias = ((r.standard_normal(shape[1]).astype(dtype) if affine else None)
                   for _ in range(2))
        g = r.standard_normal(shape).astype(dtype)
        forward, backward, terms = _layer_norm64(x, w, bias, g.astype(np.float64))
        args = (dev(b, x), dev(b, w), dev(b, bias), 1e-5)
        for impl in (b.layer_norm, fallback(b, "layer_norm")):
            out = impl(*args)
            for got, ref, what in zip(out, forward, ("y", "mean", "rstd"), strict=True):
                close(host(b, got), ref, dtype, shape[1] + 4, f"layer_norm {what}")
        y, mean, rstd = b.layer_norm(*args)
        again = b.layer_norm(*args)
        for one, two in zip((y, mean, rstd), again, strict=True):
            same_bits(host(b, two), host(b, one), "layer_norm run to run")
        grad_args = (dev(b, g), args[0], args[1], mean, rstd, affine)
        for impl in (b.layer_norm_grad, fallback(b, "layer_norm_grad")):
            out = impl(*grad_args)
            for got, ref, what in zip(out, backward, ("x", "weight", "bias"), strict=True):
                if what != "x" and not affine:
                    assert got is None, what
                    continue
                close(host(b, got), ref, dtype, 2 * shape[1] + shape[0] + 8,
                      f"layer_norm_grad {what}", terms if what == "x" else 0.0)
        first, second = b.layer_norm_grad(*grad_args), b.layer_norm_grad(*grad_args)
        for one, two in zip(first, second, strict=True):
            if one is not None:
                same_bits(host(b, two), host(b, one), "layer_norm_grad run to run")


def test_layer_norm_op_first_and_second_derivatives(backend):
    b = backend
    if np.dtype("float64") not in b.dtypes:
        pytest.skip(f"{b.name} has no float64")
    r = np.random.default_rng(5)
    inputs = [r.standard_normal((2, 3, 6)), r.standard_normal(6), r.standard_normal(6)]

    def fn(t):
        return F.layer_norm(t[0], (6,), t[1], t[2]) ** 2

    gradcheck(fn, inputs, [0, 1, 2], backend=b, name="layer_norm")
    gradgradcheck(fn, inputs, [0, 1, 2], backend=b, name="layer_norm")
    two_dims = [r.standard_normal((3, 2, 5)), r.standard_normal((2, 5))]
    gradcheck(lambda t: F.layer_norm(t[0], (2, 5), t[1]), two_dims, [0, 1], backend=b)


# ---- causal softmax and attention -------------------------------------------------------------

SCORES = [(2, 3, 5, 7), (3, 7, 5), (1, 1), (4, 1), (1, 6), (2, 70, 300), (1, 256, 256)]


def _causal64(x, scale, g):
    length, source = x.shape[-2:]
    keep = np.tril(np.ones((length, source), bool))
    s = np.where(keep, x.astype(np.float64) * scale, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    return p, p * (g - (g * p).sum(-1, keepdims=True)) * scale


@pytest.mark.parametrize("shape", SCORES, ids=[str(s) for s in SCORES])
def test_causal_softmax_forward_and_backward(backend, shape):
    b = backend
    r = np.random.default_rng(len(shape) + shape[-1])
    keep = np.tril(np.ones(shape[-2:], bool))
    for dtype in dtypes(b):
        x = (r.standard_normal(shape) * 4).astype(dtype)
        g = r.standard_normal(shape).astype(dtype)
        want, want_grad = _causal64(x, 0.125, g.astype(np.float64))
        for impl in (b.causal_softmax, fallback(b, "causal_softmax")):
            got = host(b, impl(dev(b, x), 0.125))
            close(got, want, dtype, shape[-1] + 4, "causal_softmax")
            assert np.all(got[..., ~keep] == 0) and not np.signbit(got).any()
        out = b.causal_softmax(dev(b, x), 0.125)
        same_bits(host(b, b.causal_softmax(dev(b, x), 0.125)), host(b, out), "run to run")
        for impl in (b.causal_softmax_grad, fallback(b, "causal_softmax_grad")):
            got = host(b, impl(dev(b, g), out, 0.125))
            close(got, want_grad, dtype, shape[-1] + 8, "causal_softmax_grad")
            assert np.all(got[..., ~keep] == 0)
        same_bits(host(b, b.causal_softmax_grad(dev(b, g), out, 0.125)),
                  host(b, b.causal_softmax_grad(dev(b, g), out, 0.125)), "grad run to run")


def _attention64(q, k, v):
    p, _ = _causal64(q @ np.swapaxes(k, -1, -2), 1 / np.sqrt(q.shape[-1]), 0)
    return p @ v


def test_causal_attention_matches_the_reference_and_its_derivatives(backend):
    b = backend
    r = np.random.default_rng(8)
    q, k, v = (r.standard_normal(s) for s in ((2, 3, 9, 4), (2, 3, 11, 4), (2, 3, 11, 5)))
    for dtype in dtypes(b):
        ts = [ndlite.tensor(a.astype(dtype), backend=b) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*ts, is_causal=True).numpy()
        close(out, _attention64(q, k, v), dtype, 16, "attention")
    if np.dtype("float64") not in b.dtypes:
        return

    def fn(t):
        return F.scaled_dot_product_attention(t[0], t[1], t[2], is_causal=True)

    small = [a[:1, :2, :5] if i == 0 else a[:1, :2, :6] for i, a in enumerate((q, k, v))]
    gradcheck(fn, small, [0, 1, 2], backend=b, name="causal attention")
    gradgradcheck(fn, small, [0, 1, 2], backend=b, name="causal attention")


def test_causal_attention_backward_is_deterministic(backend):
    b = backend
    r = np.random.default_rng(9)
    arrays = [r.standard_normal((2, 6, 64, 16)).astype(np.float32) for _ in range(3)]
    grads = []
    for _ in range(2):
        ts = [ndlite.tensor(a, backend=b, requires_grad=True) for a in arrays]
        (F.scaled_dot_product_attention(*ts, is_causal=True) ** 2).sum().backward()
        grads.append([t.grad.numpy() for t in ts])
    for one, two in zip(*grads, strict=True):
        same_bits(two, one, "attention gradients run to run")


# ---- OpenCL work-group trees ------------------------------------------------------------------


@pytest.mark.parametrize("group", [4, 64])
def test_opencl_row_kernels_with_real_work_groups(backend, monkeypatch, group):
    if backend.kind != "opencl":
        pytest.skip("OpenCL only")
    from ndlite_opencl import transformer

    monkeypatch.setattr(transformer, "_group", lambda b, length: group)
    b = backend
    r = np.random.default_rng(group)
    for dtype in dtypes(b):
        x = (r.standard_normal((5, 37)) + 1).astype(dtype)
        w = r.standard_normal(37).astype(dtype)
        g = r.standard_normal((5, 37)).astype(dtype)
        forward, backward, _ = _layer_norm64(x, w, w, g.astype(np.float64))
        y, mean, rstd = b.layer_norm(dev(b, x), dev(b, w), dev(b, w), 1e-5)
        for got, ref in zip((y, mean, rstd), forward, strict=True):
            close(host(b, got), ref, dtype, 41, "layer_norm")
        for got, ref in zip(b.layer_norm_grad(dev(b, g), dev(b, x), dev(b, w), mean, rstd, True),
                            backward, strict=True):
            close(host(b, got), ref, dtype, 90, "layer_norm_grad")
        s = (r.standard_normal((3, 9, 70)) * 3).astype(dtype)
        gs = r.standard_normal(s.shape).astype(dtype)
        want, want_grad = _causal64(s, 0.5, gs.astype(np.float64))
        out = b.causal_softmax(dev(b, s), 0.5)
        close(host(b, out), want, dtype, 74, "causal_softmax")
        close(host(b, b.causal_softmax_grad(dev(b, gs), out, 0.5)), want_grad, dtype, 78,
              "causal_softmax_grad")


# ---- PyTorch ----------------------------------------------------------------------------------


def test_the_ops_match_pytorch_to_second_order():
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    r = np.random.default_rng(11)
    tokens = r.integers(0, 4, (3, 50))
    arrays = [r.standard_normal(s) for s in ((4, 6), (6,), (6,))]
    x = r.standard_normal((3, 50, 6))

    def ours(w, gamma, beta, h):
        e = F.embedding(ndlite.tensor(tokens), w) + h
        y = F.layer_norm(e, (6,), gamma, beta).reshape(3, 2, 50, 3)
        return F.scaled_dot_product_attention(y, y * 0.5, y, is_causal=True)

    def theirs(w, gamma, beta, h):
        e = torch.nn.functional.embedding(torch.tensor(tokens), w) + h
        y = torch.nn.functional.layer_norm(e, (6,), gamma, beta).reshape(3, 2, 50, 3)
        return torch.nn.functional.scaled_dot_product_attention(y, y * 0.5, y, is_causal=True)

    results = []
    for lib, fn, make in ((ndlite, ours, lambda a: ndlite.tensor(a, requires_grad=True)),
                          (torch, theirs, lambda a: torch.tensor(a, requires_grad=True))):
        ts = [make(a) for a in (*arrays, x)]
        with sdpa_kernel(SDPBackend.MATH):  # torch's fused kernels have no double backward
            out = fn(*ts)
            first = lib.autograd.grad((out ** 2).sum(), ts, create_graph=True)
            second = lib.autograd.grad(sum((g ** 2).sum() for g in first), ts)
        results.append([t.detach().numpy() for t in (out, *first, *second)])
    for got, want in zip(*results, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


# ---- dropout_mask -----------------------------------------------------------------------------


def _splitmix_keep(seed: int, i: int, p: float) -> bool:
    """Element i of the mask in plain Python integers (the contract's formula, written again)."""
    m = (1 << 64) - 1
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    z ^= z >> 31
    return (z >> 40) >= int(p * (1 << 24))


@pytest.mark.parametrize("shape, p, seed", [((64, 6, 256, 256), 0.2, 12345), ((7, 33), 0.5, 0),
                                            ((1,), 0.9, 2**63 - 1), ((0, 4), 0.3, 7),
                                            ((3000,), 0.0001, 99)])
def test_dropout_mask_is_the_counter_based_draw_on_every_backend(backend, shape, p, seed):
    b = backend
    for dtype in dtypes(b):
        got = host(b, b.dropout_mask(shape, p, seed, np.dtype(dtype)))
        want = host(b, fallback(b, "dropout_mask")(shape, p, seed, np.dtype(dtype)))
        assert got.shape == shape and got.dtype == np.dtype(dtype)
        same_bits(got, want, "dropout_mask against the fallback")
        flat = got.reshape(-1)
        scale = np.dtype(dtype).type(1 / (1 - p))
        assert np.isin(flat, [0, scale]).all()
        for i in np.linspace(0, flat.size - 1, min(flat.size, 50)).astype(int):
            assert (flat[i] != 0) == _splitmix_keep(seed, int(i), p), i
        if flat.size > 10**6:  # the dropped fraction is p, to within 5 standard deviations
            assert abs((flat == 0).mean() - p) < 5 * np.sqrt(p * (1 - p) / flat.size)


def test_dropout_draws_fresh_masks_and_repeats_under_a_seed(backend):
    x = ndlite.ones(10_000, backend=backend)
    ndlite.manual_seed(3)
    first, second = F.dropout(x, 0.5).numpy(), F.dropout(x, 0.5).numpy()
    ndlite.manual_seed(3)
    again = F.dropout(x, 0.5).numpy()
    assert not np.array_equal(first, second) and np.array_equal(first, again)


@pytest.mark.parametrize("shape, p, seed", [((4, 6, 32, 32), 0.2, 12345), ((7, 33), 0.5, 0),
                                            ((0, 4), 0.3, 7), ((3000,), 0.9, 2**63 - 1),
                                            ((), 0.2, 0)])
def test_dropout_is_x_times_its_mask_bitwise(backend, shape, p, seed):
    """The fused dropout against the contract's x * dropout_mask: the same bits, signed zeros,
    infinities and NaNs included, on a transposed (non-contiguous) input too."""
    b = backend
    r = np.random.default_rng(seed % 1000)
    for dtype in dtypes(b):
        a = r.standard_normal(shape).astype(dtype)
        if a.size > 4:
            a.reshape(-1)[:4] = [-0.0, np.inf, -np.inf, np.nan]
        x0 = b.from_numpy(a.copy())  # (dev() would make a 0-d array 1-d)
        for x in (x0, b.permute(x0, tuple(range(a.ndim))[::-1])):
            got = host(b, b.dropout(x, p, seed))
            want = host(b, tfb.dropout(b, x, p, seed))
            composed = host(b, x) * host(b, b.dropout_mask(b.to_numpy(x).shape, p, seed,
                                                                  np.dtype(dtype)))
            same_bits(got, want, "dropout against the fallback")
            same_bits(got, composed.astype(dtype), "dropout against x * mask")


def test_dropout_s_gradient_is_the_same_mask_and_keeps_no_mask(backend):
    """F.dropout's backward applies the forward's mask to the gradient, drawn again from the
    seed: grad * mask bitwise, and the second order too (gradgradcheck in float64)."""
    b = backend
    x = ndlite.tensor(np.random.default_rng(1).standard_normal((8, 50)), backend=b,
                      requires_grad=True)
    ndlite.manual_seed(5)
    y = F.dropout(x, 0.3)
    g = ndlite.tensor(np.random.default_rng(2).standard_normal((8, 50)), backend=b)
    y.backward(g)
    ndlite.manual_seed(5)
    seed = int(generator().integers(0, 2**63))
    mask = host(b, b.dropout_mask((8, 50), 0.3, seed, np.dtype(np.float64)))
    same_bits(y.detach().numpy(), x.detach().numpy() * mask, "dropout's output")
    same_bits(x.grad.numpy(), g.numpy() * mask, "dropout's gradient")
    assert not any(isinstance(t, np.ndarray) or hasattr(t, "shape")
                   for t in getattr(y.grad_fn, "saved", ()) or ()), "no mask kept"

    def seeded(t):
        ndlite.manual_seed(5)
        return F.dropout(t[0], 0.3) ** 2  # squared: a second derivative that is not zero

    small = [np.random.default_rng(3).standard_normal((3, 7))]
    gradcheck(seeded, small, [0], backend=b, name="dropout")
    gradgradcheck(seeded, small, [0], backend=b, name="dropout")


# ---- gelu -------------------------------------------------------------------------------------


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_its_gradient_match_the_composed_fallback(backend, approximate):
    """A backend's one-pass gelu / gelu_grad (CuPy's and OpenCL's kernels) against the
    contract's composition of primitives, to a few roundings; signed zeros, large magnitudes
    (erf and the sigmoid saturate) and the gradient's zero near x = -0.75 included."""
    b = backend
    r = np.random.default_rng(0)
    for dtype in dtypes(b):
        a = (r.standard_normal((37, 65)) * 4).astype(dtype)
        a.reshape(-1)[:7] = [0.0, -0.0, 30.0, -30.0, 1e-3, -0.7518, -1e4]
        g = r.standard_normal(a.shape).astype(dtype)
        x, gd = dev(b, a), dev(b, g)
        eps = np.finfo(dtype).eps
        for got, want in ((b.gelu(x, approximate), tfb.gelu(b, x, approximate)),
                          (b.gelu_grad(gd, x, approximate), tfb.gelu_grad(b, gd, x, approximate))):
            got, want = host(b, got), host(b, want)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=64 * eps, atol=16 * eps * np.abs(g).max())
        assert host(b, b.gelu(x, approximate)).reshape(-1)[6] == 0.0  # -1e4: (-)0, no NaN
    if b.name.startswith("opencl"):  # the one-pass map ops ran, not the composition
        ops = {sig[0] for sig in b._plans}
        assert {"GELU_TANH", "GELU_TANH_GRAD"} <= ops if approximate == "tanh" else {
            "GELU", "GELU_GRAD"} <= ops
