"""Half precision against PyTorch (CPU): values, gradients and dtypes of the ops a half model
uses. The torch-free checks are test_half_dtypes.py and the conformance kit in half."""

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F

torch = pytest.importorskip("torch")

HALVES = ["float16"] + (["bfloat16"] if isinstance(ndlite.bfloat16, np.dtype) else [])

CASES = {
    "matmul": (lambda m, a, b: a @ b, [(8, 64), (64, 16)]),
    "sum": (lambda m, a: a.sum(-1), [(4, 300)]),
    "mean": (lambda m, a: a.mean(), [(4, 300)]),
    "softmax": (lambda m, a: m.softmax(a, -1), [(4, 33)]),
    "layer_norm": (lambda m, a: m.layer_norm(a, (33,)), [(4, 33)]),
    "gelu": (lambda m, a: m.gelu(a), [(4, 33)]),
    "mul_scalar": (lambda m, a: a * 0.1 + 1, [(4, 33)]),
    "cross_entropy": (lambda m, a: m.cross_entropy(a, _labels(m, a)), [(6, 5)]),
}


def _labels(m, a):
    return (ndlite.tensor([0, 1, 2, 3, 4, 0]) if m is F
            else torch.tensor([0, 1, 2, 3, 4, 0]))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_half_matches_torch(name, dtype):
    fn, shapes = CASES[name]
    rng = np.random.default_rng(3)
    arrays = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
    ours = [ndlite.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    tdtype = getattr(torch, dtype)
    theirs = [torch.tensor(a).to(tdtype).requires_grad_() for a in arrays]
    out, ref = fn(F, *ours), fn(torch.nn.functional, *theirs)
    assert out.dtype is ndlite.dtypes.as_dtype(dtype)
    eps = float(ndlite.dtypes.finfo(out.dtype).eps)
    scale = float(ref.detach().float().abs().max()) + 1
    np.testing.assert_allclose(out.detach().float().numpy(), ref.detach().float().numpy(),
                               rtol=0, atol=4 * eps * scale)
    out.sum().backward()
    ref.sum().backward()
    for x, t in zip(ours, theirs):
        assert x.grad.dtype is x.dtype
        g = t.grad.float().numpy()
        np.testing.assert_allclose(x.grad.float().numpy(), g, rtol=0,
                                   atol=8 * eps * (np.abs(g).max() + 1))


def test_promotion_matches_torch():
    pairs = [("float16", "float32"), ("float16", "float64"), ("float16", "int64"),
             ("float16", "bool")]
    if "bfloat16" in HALVES:
        pairs += [("float16", "bfloat16"), ("bfloat16", "float32"), ("bfloat16", "int32")]
    for a, b in pairs:
        want = torch.promote_types(getattr(torch, a), getattr(torch, b if b != "bool" else "bool"))
        got = ndlite.dtypes.promote(ndlite.dtypes.as_dtype(a), ndlite.dtypes.as_dtype(b))
        assert str(want).removeprefix("torch.") == str(got), (a, b)
    h = ndlite.ones(2, dtype="float16")
    assert (h * 2.5).dtype is ndlite.float16  # weak Python scalars, as torch
    assert (torch.ones(2, dtype=torch.float16) * 2.5).dtype == torch.float16
