"""The seed CNN learns: a bounded number of steps on the bundled MNIST subset reaches a stated
test accuracy; an opt-in slow test trains on full MNIST (../shared/data/mnist)."""

import itertools
from pathlib import Path

import pytest

import ndlite
from ndlite.cli.steps import evaluate, train_epoch
from ndlite.data import MNIST, DataLoader

FULL = Path(__file__).resolve().parents[3] / "shared" / "data" / "mnist"


def test_seed_cnn_reaches_90_percent_within_60_steps():
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn()
    opt = ndlite.optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(MNIST.bundled(True), batch_size=64, shuffle=True, seed=0)
    batches = list(itertools.islice(iter(loader), 60))
    stats = train_epoch(model, batches, opt)
    assert stats["images"] == 60 * 64
    accuracy = evaluate(model, DataLoader(MNIST.bundled(False), batch_size=500))
    assert accuracy >= 0.90, accuracy


def test_a_step_lowers_the_loss_on_the_same_batch():
    ndlite.manual_seed(1)
    model = ndlite.nn.models.mnist_cnn()
    opt = ndlite.optim.SGD(model.parameters(), lr=0.01)
    x, y = next(iter(DataLoader(MNIST.bundled(False), batch_size=32)))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = ndlite.nn.functional.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[2] < losses[0]


@pytest.mark.slow
@pytest.mark.skipif(not FULL.is_dir(), reason="full MNIST not found at ../shared/data/mnist")
def test_full_mnist_one_epoch_reaches_98_percent(request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in (minutes on a CPU): run with -m slow")
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn()
    opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)
    train_epoch(model, DataLoader(MNIST(FULL), batch_size=128, shuffle=True, seed=0), opt)
    accuracy = evaluate(model, DataLoader(MNIST(FULL, train=False), batch_size=1000))
    assert accuracy >= 0.98, accuracy
