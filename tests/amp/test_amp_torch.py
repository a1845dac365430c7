"""autocast and GradScaler against PyTorch (skipped without torch): the scale sequence and the
skipped steps of torch.amp.GradScaler, output dtypes of the ops on both of PyTorch's lists, and
the values and float32 gradients of a small network under float16 autocast."""

import math

import numpy as np
import pytest

import ndlite
from ndlite import nn as ndnn
from ndlite import optim as ndoptim
from ndlite.amp import GradScaler

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("factors", [(2.0, 0.5, 3), (3.0, 0.3, 2)])
def test_scale_sequence_matches_torch(factors):
    growth, backoff, interval = factors
    poisoned = {2, 3, 9, 10, 11, 15}
    w0 = np.array([[0.5, -1.0, 2.0]], np.float32)
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    tw = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.01)
    ts = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=growth,
                              backoff_factor=backoff, growth_interval=interval)
    nw = ndnn.Parameter(ndlite.tensor(w0))
    nopt = ndoptim.SGD([nw], lr=0.01)
    ns = GradScaler("cpu", init_scale=1024.0, growth_factor=growth, backoff_factor=backoff,
                    growth_interval=interval)
    for i in range(20):
        topt.zero_grad()
        ts.scale((tw * torch.tensor(x)).sum()).backward()
        nopt.zero_grad()
        ns.scale((nw * ndlite.tensor(x)).sum()).backward()
        if i in poisoned:
            tw.grad[0, 1] = math.inf
            nw.grad[0, 1] = math.inf
        ts.step(topt)
        ts.update()
        ns.step(nopt)
        ns.update()
        assert ns.get_scale() == ts.get_scale(), i
        np.testing.assert_array_equal(nw.detach().numpy(), tw.detach().numpy())
    assert ns.state_dict() == ts.state_dict()


def test_output_dtypes_match_torch_cpu_autocast():
    """Ops on PyTorch's CPU and CUDA lists alike: the low ones and the float32 losses."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((3, 6)).astype(np.float32)
    img = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    k = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    labels = np.array([0, 1, 2, 1])

    def run(lib, F, dtype, region):
        t = lib.tensor
        with region:
            h = F.linear(t(x), t(w))
            return {"linear": h, "matmul": t(x) @ t(w).T, "conv2d": F.conv2d(t(img), t(k)),
                    "cross_entropy": F.cross_entropy(h, t(labels)),
                    "mse_loss": F.mse_loss(h, h * 0.5),
                    "nll_loss": F.nll_loss(h, t(labels))}

    ours = run(ndlite, ndnn.functional, ndlite.float16,
               ndlite.autocast("cpu", dtype=ndlite.float16))
    theirs = run(torch, torch.nn.functional, torch.float16,
                 torch.autocast("cpu", dtype=torch.float16))
    for name, y in ours.items():
        assert str(y.dtype) == str(theirs[name].dtype).replace("torch.", ""), name


def test_network_values_and_gradients_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 10)).astype(np.float32)
    w1 = (rng.standard_normal((16, 10)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((4, 16)) * 0.3).astype(np.float32)
    labels = rng.integers(0, 4, 8)

    def run(lib, F, region, param):
        p1, p2 = param(w1), param(w2)
        with region:
            loss = F.cross_entropy(F.linear(F.linear(lib.tensor(x), p1).relu(), p2),
                                   lib.tensor(labels))
        loss.backward()
        return loss.item(), p1.grad.detach().numpy(), p2.grad.detach().numpy()

    ours = run(ndlite, ndnn.functional, ndlite.autocast("cpu", dtype=ndlite.float16),
               lambda a: ndnn.Parameter(ndlite.tensor(a)))
    theirs = run(torch, torch.nn.functional, torch.autocast("cpu", dtype=torch.float16),
                 lambda a: torch.tensor(a, requires_grad=True))
    assert ours[1].dtype == np.float32 and ours[2].dtype == np.float32
    assert abs(ours[0] - theirs[0]) < 2e-3
    for a, b in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-3)
