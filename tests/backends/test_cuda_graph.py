"""ndlite.cuda: CUDA graph capture of a whole training step. Replays give bitwise the same
parameters as eager steps (SGD with momentum, RMSprop, Adam, a learning rate changed between
steps); bad labels are refused before a replay; host reads inside a capture raise a clear
error; the backend's methods are never replaced while recording. Without a GPU only the parts
that need none run (importing ndlite imports no CuPy; the backend knows only ndlite.device)."""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ndlite
from ndlite.device.registry import probe
from ndlite.errors import BackendUnavailableError, ShapeError
from ndlite.nn import functional as F


def test_importing_ndlite_and_ndlite_cuda_imports_no_cupy():
    code = "import sys, ndlite, ndlite.cuda; ndlite.cuda.capturing(); print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_capture_needs_the_cupy_backend():
    x = ndlite.ones(2, 3, backend="numpy")
    with pytest.raises(BackendUnavailableError, match="cupy"):
        ndlite.cuda.capture(lambda t: t * 2, x)


def test_outside_a_capture_host_checks_run_at_once():
    assert not ndlite.cuda.capturing()
    assert ndlite.cuda.defer_host_check(ndlite.zeros(2), lambda values: None) is False


def test_the_cupy_backend_imports_nothing_of_ndlite_but_the_device_layer():
    # the device layer, and the two modules below it (errors, dtypes), as every backend may
    package = Path(__file__).resolve().parents[2] / "backends" / "ndlite_cupy"
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                assert name.split(".")[0] != "ndlite" or name in (
                    "ndlite.device", "ndlite.errors", "ndlite.dtypes") or \
                    name.startswith("ndlite.device."), f"{path.name} imports {name}"


BACKEND, WHY = probe("cupy")
gpu = pytest.mark.skipif(BACKEND is None, reason=f"backend cupy unavailable: {WHY}")


def _batches(count, n=16, seed=0):
    r = np.random.default_rng(seed)
    return [(r.random((n, 1, 28, 28), dtype=np.float32), r.integers(0, 10, n))
            for _ in range(count)]


def _setup(make_optimizer):
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(BACKEND)
    opt = make_optimizer(model.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


OPTIMIZERS = {
    "sgd_momentum": lambda ps: ndlite.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "rmsprop": lambda ps: ndlite.optim.RMSprop(ps, lr=1e-3),
    "adam": lambda ps: ndlite.optim.Adam(ps, lr=1e-3),
    "adamw": lambda ps: ndlite.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
}


@gpu
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_replays_give_bitwise_the_parameters_of_eager_steps(name):
    batches = _batches(6)
    model, opt, step = _setup(OPTIMIZERS[name])
    eager_losses = []
    for i, (x, y) in enumerate(batches):
        if i == 3:
            opt.param_groups[0]["lr"] *= 0.5  # a schedule changes it between steps
        eager_losses.append(step(ndlite.tensor(x, backend=BACKEND),
                                 ndlite.tensor(y, backend=BACKEND)).item())
    eager = [p.detach().numpy() for p in model.parameters()]

    model, opt, step = _setup(OPTIMIZERS[name])
    x0, y0 = batches[0]
    graph = ndlite.cuda.capture(step, x0, y0, optimizers=[opt], warmup=1)
    losses = [graph.warmup_outputs.item()]
    for i, (x, y) in enumerate(batches[1:], start=1):
        if i == 3:
            opt.param_groups[0]["lr"] *= 0.5
        losses.append(graph(x, y).item())
    assert losses == eager_losses
    for got, want in zip((p.detach().numpy() for p in model.parameters()), eager, strict=True):
        np.testing.assert_array_equal(got, want)
    if name.startswith("adam"):
        assert all(s["step"] == len(batches) for s in opt.state.values())
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())


@gpu
@pytest.mark.parametrize("name", ["sgd_momentum", "adam"])
def test_replays_queued_back_to_back_each_read_their_own_batch(name):
    """Host batches go to the device through page-locked buffers, copied without the host
    waiting: replays queued with no read in between must still each train on their batch."""
    batches = _batches(8)
    model, opt, step = _setup(OPTIMIZERS[name])
    for x, y in batches:
        step(ndlite.tensor(x, backend=BACKEND), ndlite.tensor(y, backend=BACKEND))
    eager = [p.detach().numpy() for p in model.parameters()]
    model, opt, step = _setup(OPTIMIZERS[name])
    graph = ndlite.cuda.capture(step, *batches[0], optimizers=[opt], warmup=1)
    for x, y in batches[1:]:
        graph(x.copy(), y.copy())  # nothing read back until the end
    for got, want in zip((p.detach().numpy() for p in model.parameters()), eager, strict=True):
        np.testing.assert_array_equal(got, want)


@gpu
def test_recording_replaces_no_backend_method_and_defers_checks_only_meanwhile():
    model, opt, step = _setup(OPTIMIZERS["sgd_momentum"])
    (x, y), (x1, y1) = _batches(2)
    def methods():
        return {name: value for name, value in vars(BACKEND).items() if callable(value)}

    before = methods()
    seen = {}

    def recorded(x, y):  # the warm-up call, then the recording: what it sees last is kept
        seen["methods"], seen["capturing"] = methods(), ndlite.cuda.capturing()
        return step(x, y)

    graph = ndlite.cuda.capture(recorded, x, y, optimizers=[opt])
    assert seen["capturing"] and not ndlite.cuda.capturing()
    assert seen["methods"] == before == methods()
    assert BACKEND.defer_host_check(BACKEND.from_numpy(y1), lambda values: 1 / 0) is False
    assert np.isfinite(graph(x1, y1).item())


@gpu
def test_labels_the_step_computes_cannot_be_checked_before_a_replay():
    model, opt, _ = _setup(OPTIMIZERS["rmsprop"])
    (x, y), = _batches(1)

    def step(x, y):
        return F.nll_loss(model(x), y + 0)

    with pytest.raises(ValueError, match="pass it to the step as an input"):
        ndlite.cuda.capture(step, x, y, warmup=0, backend=BACKEND)
    assert not ndlite.cuda.capturing()


@gpu
def test_bad_labels_are_refused_before_a_replay_and_change_nothing():
    model, opt, step = _setup(OPTIMIZERS["rmsprop"])
    (x, y), (x1, y1) = _batches(2)
    graph = ndlite.cuda.capture(step, x, y, optimizers=[opt])
    graph(x1, y1)
    before = [p.detach().numpy() for p in model.parameters()]
    bad = y1.copy()
    bad[3] = 10
    with pytest.raises(IndexError, match="out of bounds for 10 classes"):
        graph(x1, bad)
    with pytest.raises(ShapeError, match="captured for"):
        graph(x1[:8], y1[:8])
    for p, want in zip(model.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.detach().numpy(), want)


@gpu
def test_a_host_read_inside_a_capture_raises_a_clear_error():
    model, opt, _ = _setup(OPTIMIZERS["rmsprop"])
    (x, y), = _batches(1)

    def step(x, y):
        loss = F.nll_loss(model(x), y)
        print(loss.item())  # not allowed while recording
        return loss

    with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):
        ndlite.cuda.capture(step, x, y, warmup=0, backend=BACKEND)
    assert not ndlite.cuda.capturing()
    assert F.nll_loss(model(ndlite.tensor(x, backend=BACKEND)),
                      ndlite.tensor(y, backend=BACKEND)).item() > 0  # the backend still works


@gpu
def test_an_optimizer_left_out_of_the_capture_is_an_error():
    _, opt, step = _setup(OPTIMIZERS["adam"])
    (x, y), = _batches(1)
    with pytest.raises(ValueError, match="optimizers="):
        ndlite.cuda.capture(step, x, y, backend=BACKEND)


@gpu
def test_the_trainer_replays_full_batches_and_runs_a_short_last_one_eagerly():
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(BACKEND)
    opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)
    trainer = ndlite.cuda.Trainer(model, opt, F.nll_loss)
    r = np.random.default_rng(1)
    images = r.random((40, 1, 28, 28), dtype=np.float32)
    labels = r.integers(0, 10, 40)
    data = ndlite.data.TensorDataset(ndlite.tensor(images), ndlite.tensor(labels))
    loader = ndlite.data.DataLoader(data, batch_size=16, backend="numpy")
    stats = trainer.train_epoch(loader)
    assert stats["images"] == 40 and np.isfinite(stats["loss"])
    assert all(s["step"] == 3 for s in opt.state.values())
