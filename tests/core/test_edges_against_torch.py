"""Values and gradients against PyTorch at the inputs where implementations part ways: zeros
(norms, products, atan2), ties (clamp to tensor bounds, maximum), kinks (relu6, hardswish,
hardtanh), infinities (huber, smooth_l1, hardswish), fully masked attention rows, NaN
propagation, and the PyTorch functions, layers and optimizers added with them. Run only
where torch is installed (not in CI, which has none; the GPU machine and a developer's venv
with torch do). Gradients at NaN inputs are left out: PyTorch's there are arbitrary."""

import numpy as np
import pytest

import ndlite

torch = pytest.importorskip("torch")

S = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 6.0, 20.0, -20.0,
              np.inf, -np.inf])
Z = np.array([[0.0, 2.0, 3.0, 0.0], [1.0, 0.0, 2.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
A = np.array([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, -1.0, 5.0], [2.0, 2.0, 2.0, 2.0]])
B = np.array([[3.0, 3.0, 1.0, 2.0], [0.0, -0.0, -1.0, 0.0], [2.0, 0.0, -2.0, 2.0]])
M = np.array([[True, False, False], [True, True, False], [False, False, False]])


def _same(a, b, rtol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    same_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    ok = (np.isnan(a) & np.isnan(b)) | same_inf | np.isclose(a, b, rtol=rtol, atol=1e-10)
    assert ok.all(), (a[~ok], b[~ok])


def _run(fw, fn, arrays):
    leaves = [fw.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = fn(fw, *leaves)
    weights = np.cos(np.arange(int(np.prod(out.shape))) * 0.7).reshape(tuple(out.shape))
    (out * fw.tensor(weights)).sum().backward()
    grads = [np.zeros(a.shape) if t.grad is None else t.grad.detach().numpy() for t, a in
             zip(leaves, arrays)]
    return out.detach().numpy(), grads


F = {  # name -> (fn(framework, *tensors), inputs)
    "relu6": (lambda fw, x: fw.nn.functional.relu6(x), [S]),
    "hardtanh": (lambda fw, x: fw.nn.functional.hardtanh(x, 0.0, 6.0), [S]),
    "hardswish": (lambda fw, x: fw.nn.functional.hardswish(x), [S[np.isfinite(S) | (S > 0)]]),
    "hardsigmoid": (lambda fw, x: fw.nn.functional.hardsigmoid(x), [S]),
    "mish": (lambda fw, x: fw.nn.functional.mish(x), [S]),
    "softshrink": (lambda fw, x: fw.nn.functional.softshrink(x, 0.5), [S]),
    "threshold": (lambda fw, x: fw.nn.functional.threshold(x, 0.5, -7.0), [S]),
    "vector_norm": (lambda fw, x: fw.linalg.vector_norm(x, dim=1), [Z * (Z > 1)]),
    "normalize": (lambda fw, x: fw.nn.functional.normalize(x, dim=1), [Z * (Z > 3)]),
    "cosine": (lambda fw, x, y: fw.nn.functional.cosine_similarity(x, y), [Z[:2], Z[1:] * 0]),
    "prod": (lambda fw, x: x.prod(1), [Z]),
    "cumprod": (lambda fw, x: x.cumprod(1), [Z]),
    "atan2": (lambda fw, y, x: fw.atan2(y, x), [A, B]),
    "clamp_tensor": (lambda fw, x, lo: x.clamp(min=lo), [A, B]),
    "maximum": (lambda fw, x, y: fw.maximum(x, y), [A, B]),
    "huber": (lambda fw, x: fw.nn.functional.huber_loss(x, x.detach() * 0, reduction="none"),
              [S]),
    "smooth_l1": (lambda fw, x: fw.nn.functional.smooth_l1_loss(x, x.detach() * 0,
                                                                 reduction="none"), [S]),
    "sdpa_masked": (lambda fw, q: fw.nn.functional.scaled_dot_product_attention(
        q.reshape(1, 3, 4), q.reshape(1, 3, 4), q.reshape(1, 3, 4), attn_mask=fw.tensor(M)),
        [Z / 4]),
    "embedding_pad": (lambda fw, w: fw.nn.functional.embedding(
        fw.tensor(np.array([0, 1, 1, 2])), w, padding_idx=1), [Z]),
    "lerp": (lambda fw, x, y: fw.lerp(x, y, 0.3), [A, B]),
    "addcdiv": (lambda fw, x, y: fw.addcdiv(x, y, y * y + 1, value=0.5), [A, B]),
    "diag": (lambda fw, x: fw.diag(x, 1), [A]),
    "repeat_interleave": (lambda fw, x: x.repeat_interleave(
        fw.tensor(np.array([1, 0, 2, 1])), dim=1), [A]),
    "quantile": (lambda fw, x: fw.quantile(x, fw.tensor(np.array([0.25, 0.6])), dim=1), [A]),
    "cdist": (lambda fw, x, y: fw.cdist(x, y), [A, B]),
    "unfold": (lambda fw, x: x.unfold(1, 2, 1), [A]),
    "tensordot": (lambda fw, x, y: fw.tensordot(x, y, dims=([1], [1])), [A, B]),
    "glu": (lambda fw, x: fw.nn.functional.glu(x, 1), [A]),
    "prelu": (lambda fw, x, w: fw.nn.functional.prelu(x.reshape(1, 3, 4), w), [A, B[:, 0]]),
    "pixel_shuffle": (lambda fw, x: fw.nn.functional.pixel_shuffle(x.reshape(1, 4, 1, 3), 2),
                      [A]),
    "adaptive_max_pool": (lambda fw, x: fw.nn.functional.adaptive_max_pool2d(
        x.reshape(1, 1, 3, 4), (2, 3)), [A + np.arange(12.0).reshape(3, 4) / 7]),
    "instance_norm": (lambda fw, x: fw.nn.functional.instance_norm(x.reshape(1, 3, 4)), [A]),
    "bicubic": (lambda fw, x: fw.nn.functional.interpolate(x.reshape(1, 1, 3, 4), size=(5, 7),
                                                             mode="bicubic"), [A]),
    "area": (lambda fw, x: fw.nn.functional.interpolate(x.reshape(1, 1, 3, 4), size=(2, 3),
                                                          mode="area"), [A]),
    "triplet": (lambda fw, a, p: fw.nn.functional.triplet_margin_loss(a, p, p.flip(0)),
                [A, B]),
}


@pytest.mark.parametrize("name", sorted(F))
def test_values_and_gradients_are_pytorchs(name):
    fn, inputs = F[name]
    ours, theirs = _run(ndlite, fn, inputs), _run(torch, fn, inputs)
    _same(ours[0], theirs[0], 1e-9)
    for i, (g, h) in enumerate(zip(ours[1], theirs[1])):
        finite = np.all([np.isfinite(a) for a in inputs], axis=0) if len(inputs) > 1 and \
            all(a.shape == inputs[0].shape for a in inputs) else np.isfinite(inputs[i])
        _same(np.where(finite, g, 0), np.where(finite, h, 0), 1e-7)


@pytest.mark.parametrize("name,kw", [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "maximize": True}),
    ("AdamW", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.3}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.01, "decoupled_weight_decay": True, "weight_decay": 0.1}),
])
def test_optimizer_trajectories_are_pytorchs(name, kw):
    rng = np.random.default_rng(0)
    start, grads = rng.standard_normal((3, 4)), [rng.standard_normal((3, 4)) for _ in range(10)]
    runs = []
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # NAdam keeps its momentum product in this dtype
    try:
        for fw in (ndlite, torch):
            p = fw.nn.Parameter(fw.tensor(start.copy()))
            opt = getattr(fw.optim, name)([p], **kw)
            for g in grads:
                p.grad = fw.tensor(g.copy())
                opt.step()
            runs.append(p.detach().numpy())
    finally:
        torch.set_default_dtype(previous)
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,kw", [
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.01}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "mode": "triangular2"}),
    ("PolynomialLR", {"total_iters": 6, "power": 2.0}),
])
def test_scheduler_sequences_are_pytorchs(name, kw):
    runs = []
    for fw in (ndlite, torch):
        opt = fw.optim.SGD([fw.nn.Parameter(fw.zeros(1))], lr=0.1, momentum=0.9)
        sched = getattr(fw.optim.lr_scheduler, name)(opt, **kw)
        lrs = []
        for _ in range(20):
            lrs.append((sched.get_last_lr()[0], opt.param_groups[0]["momentum"]))
            opt.step()
            sched.step()
        runs.append(lrs)
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12)
