"""PyTorch utilities programs reach for: nn.utils clipping, containers, Identity, grad modes
as bare decorators, f-string formatting of 0-d tensors, axis=, F.pad modes, interpolate."""

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite import nn


def test_clip_grad_norm_and_value():
    a, b = nn.Parameter(ndlite.ones(3)), nn.Parameter(ndlite.ones(4))
    a.grad, b.grad = ndlite.full((3,), 2.0), ndlite.full((4,), 2.0)
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert total.item() == pytest.approx(np.sqrt(7 * 4))
    joint = np.sqrt((a.grad * a.grad).sum().item() + (b.grad * b.grad).sum().item())
    assert joint == pytest.approx(1.0, rel=1e-5)
    nn.utils.clip_grad_value_([a], 0.1)
    assert a.grad.tolist() == pytest.approx([0.1] * 3)


def test_containers_register_their_parameters():
    model = nn.ModuleDict({"wte": nn.Embedding(4, 2) if hasattr(nn, "Embedding") else
                           nn.Linear(4, 2), "head": nn.Identity()})
    model["proj"] = nn.Linear(2, 2)
    assert "proj" in model and len(model) == 3
    assert {name.split(".")[0] for name, _ in model.named_parameters()} == {"wte", "proj"}
    plist = nn.ParameterList([ndlite.zeros(2), nn.Parameter(ndlite.ones(1))])
    pdict = nn.ParameterDict({"scale": ndlite.ones(2)})
    assert len(list(plist.parameters())) == 2 and pdict["scale"].requires_grad
    assert nn.SiLU()(ndlite.zeros(1)).item() == 0.0 and nn.Identity(5)(3) == 3


def test_grad_modes_and_formatting():
    x = ndlite.ones(2, requires_grad=True)

    @ndlite.no_grad
    def bare(t):
        return t * 2

    @ndlite.inference_mode()
    def called(t):
        return t * 2

    assert not bare(x).requires_grad and not called(x).requires_grad
    with ndlite.inference_mode():
        assert not (x * 2).requires_grad
    loss = (x * 3).sum()
    assert f"{loss:.4f}" == "6.0000" and f"{loss.detach():>5.1f}" == "  6.0"
    assert ndlite.is_tensor(x) and not ndlite.is_tensor(1.0)
    assert ndlite.allclose(x, ndlite.ones(2)) and x.sum(axis=0).item() == 2.0
    assert ndlite.ones(2, 3).mean(axis=1, keepdims=True).shape == (2, 1)


def test_pad_modes_and_interpolate_match_torch_conventions():
    x = ndlite.arange(6.0).reshape(1, 1, 2, 3)
    assert F.pad(x, (2, 1), mode="reflect")[0, 0, 0].tolist() == [2, 1, 0, 1, 2, 1]
    assert F.pad(x, (1, 1), mode="replicate")[0, 0, 1].tolist() == [3, 3, 4, 5, 5]
    assert F.pad(x, (1, 2), mode="circular")[0, 0, 0].tolist() == [2, 0, 1, 2, 0, 1]
    assert F.interpolate(x, scale_factor=2).shape == (1, 1, 4, 6)
    up = F.interpolate(x, size=(2, 6), mode="bilinear")[0, 0, 0].tolist()
    assert up == pytest.approx([0.0, 0.25, 0.75, 1.25, 1.75, 2.0])
    with pytest.raises(ndlite.ShapeError, match="reflect"):
        F.pad(x, (3, 0), mode="reflect")


def test_transformer_layers():
    emb = nn.Embedding(10, 4, padding_idx=0)
    idx = ndlite.tensor([[0, 3, 9]])
    out = emb(idx)
    assert out.shape == (1, 3, 4) and out[0, 0].tolist() == [0.0] * 4
    out.sum().backward()
    assert emb.weight.grad[0].tolist() == [0.0] * 4 and emb.weight.grad[3].tolist() == [1.0] * 4
    with pytest.raises(IndexError, match="embedding"):
        emb(ndlite.tensor([10]))
    ln = nn.LayerNorm(4)
    y = ln(ndlite.arange(8.0).reshape(2, 4)).detach().numpy()
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-6)
    np.testing.assert_allclose(y.std(-1), 1, atol=1e-3)
    q = ndlite.randn(1, 2, 3, 4)
    att = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert att.shape == (1, 2, 3, 4) and att[0, 0, 0].tolist() == q[0, 0, 0].tolist()


def test_unfold_and_fold_are_adjoint():
    x = ndlite.arange(24.0).reshape(1, 2, 3, 4)
    cols = F.unfold(x, 2)
    assert cols.shape == (1, 8, 6) and cols[0, :, 0].tolist() == [0, 1, 4, 5, 12, 13, 16, 17]
    counts = F.fold(F.unfold(ndlite.ones(1, 1, 3, 4), 2), (3, 4), 2)
    assert counts[0, 0].tolist() == [[1, 2, 2, 1], [2, 4, 4, 2], [1, 2, 2, 1]]
    with pytest.raises(ndlite.ShapeError, match="fold"):
        F.fold(cols, (5, 5), 2)


def test_more_losses_against_their_definitions():
    x, y = ndlite.tensor([0.0, 0.5, 3.0]), ndlite.tensor([0.0, 0.0, 0.0])
    assert F.smooth_l1_loss(x, y, reduction="none").tolist() == [0.0, 0.125, 2.5]
    assert F.huber_loss(x, y, delta=2.0, reduction="sum").item() == pytest.approx(0.125 + 4.0)
    p = ndlite.tensor([[0.5, 0.5]])
    assert F.kl_div(p.log(), p, reduction="batchmean").item() == pytest.approx(0.0, abs=1e-7)
    sim = F.cosine_similarity(ndlite.tensor([[1.0, 0.0]]), ndlite.tensor([[1.0, 1.0]]))
    assert sim.item() == pytest.approx(2 ** -0.5)
