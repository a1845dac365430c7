"""DistributedDataParallel with two MPI ranks against one process at the same global batch:
float64 parameters within 1e-10, float32 gradients within the kit's scaled rule, the same
bits on every rank; buckets, no_sync, buffers, OpenCL through host memory, and the errors
that replace a hang (ranks/ddp.py runs the ranks once for every test here)."""

import importlib.util
import json

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite import nn
from ndlite.nn.parallel import assign_buckets, gradient_counts
from ndlite.ops.registry import SCALED
from ndlite.testing.magnitude import magnitude_backend, recording_backend
from ndlite.testing.roundings import rounding_backend
from ndlite.testing.tolerance import judge

from .launching import MPI_MISSING, RANKS, explain, launch

spec = importlib.util.spec_from_file_location("ddp_ranks", RANKS / "ddp.py")
scenario = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scenario)
WORLD = 2


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """[(arrays, notes)] of each rank."""
    if MPI_MISSING:
        pytest.skip(MPI_MISSING)
    out = tmp_path_factory.mktemp("ddp")
    result = launch("ddp.py", out, nproc=WORLD)
    assert result.returncode == 0, explain(result)
    return [(dict(np.load(out / f"rank{r}.npz")), json.loads((out / f"rank{r}.json").read_text()))
            for r in range(WORLD)]


def _one_process_sgd():
    ndlite.manual_seed(100)  # rank 0's seed in ranks/ddp.py
    model = nn.models.mnist_cnn().double()
    initial = scenario.params_of(model)
    opt = ndlite.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(scenario.STEPS):
        x, y = scenario.batches(step)
        opt.zero_grad()
        F.nll_loss(model(ndlite.tensor(x)), ndlite.tensor(y)).backward()
        opt.step()
    return initial, scenario.params_of(model), scenario.grads_of(model)


def test_replicas_start_from_rank_0s_parameters(ranks):
    initial, _, _ = _one_process_sgd()
    for arrays, _ in ranks:
        assert np.array_equal(arrays["initial"], initial)


def test_float64_training_matches_one_process_at_the_global_batch(ranks):
    _, params, grads = _one_process_sgd()
    for arrays, _ in ranks:
        assert np.abs(arrays["sgd_params"] - params).max() <= 1e-10
        assert np.abs(arrays["sgd_grads"] - grads).max() <= 1e-10


def test_every_rank_holds_the_same_bits(ranks):
    (first, _), *others = ranks
    for arrays, _ in others:
        for key in ("sgd_params", "sgd_grads", "no_sync_grads", "float32_grads"):
            assert np.array_equal(arrays[key], first[key]), key


def test_buckets_go_in_reverse_parameter_order_with_a_small_first_one(ranks):
    model = nn.models.mnist_cnn().double()
    params = list(model.parameters())
    expected = assign_buckets([p.numel() * 8 for p in params], ["float64"] * len(params),
                              cap_bytes=int(0.1 * 2**20))
    sizes = [sum(params[i].numel() for i in bucket) for bucket in expected]
    assert len(sizes) > 1
    for _, notes in ranks:
        assert notes["bucket_sizes"] == sizes


def test_bucket_assignment():
    # reverse order; the first bucket closes at its own (small) cap, later ones at cap_bytes
    assert assign_buckets([1, 1, 1, 1, 1], ["f"] * 5, cap_bytes=2, first_cap_bytes=1) == \
        [[4], [3, 2], [1, 0]]
    # one open bucket per dtype; each dtype's first bucket is a first bucket
    assert assign_buckets([4, 4, 4, 4], ["a", "b", "a", "b"], cap_bytes=8,
                          first_cap_bytes=4) == [[3], [2], [1], [0]]
    assert assign_buckets([10] * 3, ["f"] * 3, cap_bytes=100, first_cap_bytes=100) == [[2, 1, 0]]


def test_gradient_counts_follow_the_graph():
    a, b, unused = (ndlite.ones(2, requires_grad=True) for _ in range(3))
    out = (a * a + b).sum()
    assert gradient_counts(out, [a, b, unused]) == [2, 1, 0]
    assert gradient_counts((out, {"a": a}), [a, b, unused]) == [3, 1, 0]


def test_no_sync_accumulates_locally_then_reduces_the_sum(ranks):
    (first, _), (second, _) = ranks
    assert not np.array_equal(first["no_sync_local"], second["no_sync_local"])
    ndlite.manual_seed(0)
    model = nn.models.mnist_cnn().double()
    for step in (10, 11):
        x, y = scenario.batches(step)
        F.nll_loss(model(ndlite.tensor(x)), ndlite.tensor(y)).backward()
    for arrays, _ in ranks:
        assert np.abs(arrays["no_sync_grads"] - scenario.grads_of(model)).max() <= 1e-10


def _gradients(params32, x, backend, y=None, cotangent=None):
    """Gradients of one process at the global batch, in float64 on `backend`: of the loss
    (with `y`; also returns its gradient at the logits), or of the network up to the logits
    with `cotangent` there (the kit's magnitude and rounding runs: log_softmax and nll_loss
    are transcendental, judged on their own values, so S starts at the logits)."""
    ndlite.manual_seed(0)
    model = nn.models.mnist_cnn()
    with ndlite.no_grad():
        for p, value in zip(model.parameters(), params32, strict=True):
            p.copy_(ndlite.tensor(value))
    model = model.double().to(backend=backend)
    body, head = nn.Sequential(*list(model.children())[:-1]), list(model.children())[-1]
    logits = body(ndlite.tensor(x.astype(np.float64), backend=backend))
    if cotangent is None:
        logits.retain_grad()
        F.nll_loss(head(logits), ndlite.tensor(y, backend=backend)).backward()
    else:
        logits.backward(ndlite.tensor(cotangent, backend=backend))
    grads = np.concatenate([np.asarray(p.grad.numpy(), dtype=np.float64).ravel()
                            for p in model.parameters()])
    return grads, (logits.grad.numpy() if cotangent is None else None)


def test_float32_gradients_pass_the_kits_scaled_rule(ranks):
    ndlite.manual_seed(0)
    params32 = [p.detach().numpy().copy() for p in nn.models.mnist_cnn().parameters()]
    x, y = scenario.batches(20, "float32")
    reference, at_logits = _gradients(params32, x, ndlite.get_backend("numpy"), y=y)
    recorder, magnitudes = recording_backend(), magnitude_backend()
    recorder.tape = []
    _gradients(params32, x, recorder, cotangent=at_logits)
    magnitudes.replay(recorder.tape)  # S: the same computation on magnitudes
    scale, _ = _gradients(params32, x, magnitudes, cotangent=np.abs(at_logits))
    assert np.isfinite(scale).all()
    scale = np.maximum(scale, np.abs(reference))
    # R: the roundings behind one process's gradient from the logits down, plus those of
    # log_softmax and nll_loss over 10 classes (16), the ranks' sum and the division
    counts, _ = _gradients(params32, x, rounding_backend(), cotangent=np.zeros_like(at_logits))
    roundings = counts + 16 + WORLD
    for arrays, _ in ranks:
        verdict = judge(arrays["float32_grads"], reference, SCALED, "float32", scale, roundings)
        assert verdict.ok, verdict.message
        assert verdict.worst > 0  # float32 differs from the float64 reference somewhere


def test_an_unused_parameter_is_an_error_at_forward_not_a_hang(ranks):
    for _, notes in ranks:
        assert "spare.weight, spare.bias take no part in this forward" in notes["unused"]


def test_a_gradient_from_outside_the_module_is_an_error(ranks):
    for _, notes in ranks:
        assert "weight received more gradients (2) than its uses in the forward (1)" \
            in notes["extra_use"]


def test_backward_from_part_of_the_output_is_reported_at_the_next_forward(ranks):
    for _, notes in ranks:
        assert "no gradient reached b.weight, b.bias" in notes["partial"]


def test_buffers_come_from_rank_0_and_batch_statistics_stay_per_rank(ranks):
    (first, _), (second, _) = ranks
    assert first["bn_built"].tolist() == second["bn_built"].tolist() == [1.0, 1.0, 1.0]
    assert not np.array_equal(first["bn_after_forward"], second["bn_after_forward"])


def test_opencl_tensors_reduce_through_host_memory(ranks):
    (first, notes), (second, _) = ranks
    if notes["opencl"]:
        pytest.skip(f"no OpenCL device: {notes['opencl']}")
    assert np.array_equal(first["opencl_params"], second["opencl_params"])
    ndlite.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = ndlite.optim.SGD(mlp.parameters(), lr=0.1)
    for step in range(scenario.STEPS):
        x = np.random.default_rng(30 + step).standard_normal((16, 8)).astype("float32")
        opt.zero_grad()
        pred = mlp(ndlite.tensor(x))
        (pred * pred).mean().backward()
        opt.step()
    np.testing.assert_allclose(first["opencl_params"], scenario.params_of(mlp), rtol=1e-5,
                               atol=1e-6)
