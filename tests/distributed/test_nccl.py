"""The NCCL engine on the GPU machine: a world of one through the whole DDP path (every
collective and dtype, DDP against one process, a CUDA-graph-captured DDP step), NCCL's refusal
of two ranks on one GPU turned into a clear error, and two GPUs where there are two. Skipped,
saying why, without CuPy, NCCL or a GPU."""

import numpy as np
import pytest

import ndlite
import ndlite.distributed as dist
import ndlite.nn.functional as F
from ndlite import nn
from ndlite.device.registry import probe
from ndlite.nn.parallel import DistributedDataParallel as DDP

from .launching import explain, launch


def _gpu():
    backend, why = probe("cupy")
    if backend is None:
        pytest.skip(f"no CuPy GPU: {why}")
    if not dist.is_nccl_available():
        pytest.skip("CuPy has no NCCL: pip install nvidia-nccl-cu12 (or -cu13)")
    return backend


@pytest.fixture
def gpu():
    """cupy:0 in a NCCL world of one (this process)."""
    backend = _gpu()
    dist.init_process_group("nccl", device=backend, rank=0, world_size=1, timeout=120)
    try:
        yield backend
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_collectives_in_a_world_of_one(gpu, dtype):
    values = np.arange(12).reshape(3, 4) % 3 == 1 if dtype == "bool" else \
        np.arange(12).reshape(3, 4).astype(dtype)
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT]
    if dtype.startswith("float"):
        ops.append(dist.ReduceOp.AVG)
    for op in ops:
        t = ndlite.tensor(values, backend=gpu)
        dist.all_reduce(t, op=op)
        assert np.array_equal(t.numpy(), values), op
        view = ndlite.tensor(np.ascontiguousarray(values.T), backend=gpu).T
        dist.all_reduce(view, op=op, async_op=True).wait()
        assert np.array_equal(view.numpy(), values)
    t = ndlite.tensor(values, backend=gpu)
    dist.broadcast(t, 0)
    assert np.array_equal(t.numpy(), values)
    out = [ndlite.zeros(values.shape, dtype=dtype, backend=gpu)]
    dist.all_gather(out, ndlite.tensor(values, backend=gpu))
    assert np.array_equal(out[0].numpy(), values)
    out = ndlite.zeros(values.shape, dtype=dtype, backend=gpu)
    dist.reduce_scatter(out, [ndlite.tensor(values, backend=gpu)])
    assert np.array_equal(out.numpy(), values)
    dist.barrier()
    with pytest.raises(dist.DistributedError, match="move it there"):
        dist.all_reduce(ndlite.tensor(values, backend="numpy"))


def _train(model, steps, step_fn):
    rng = np.random.default_rng(0)
    for _ in range(steps):
        x = rng.standard_normal((32, 1, 28, 28)).astype(model_dtype(model))
        y = rng.integers(0, 10, 32)
        step_fn(x, y)


def model_dtype(model):
    return next(iter(model.parameters())).dtype


def _pair(gpu, dtype):
    ndlite.manual_seed(0)
    plain = nn.models.mnist_cnn().to(dtype=np.dtype(dtype), backend=gpu)
    ndlite.manual_seed(0)
    wrapped = nn.models.mnist_cnn().to(dtype=np.dtype(dtype), backend=gpu)
    return plain, wrapped


def _params(model):
    return np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ddp_in_a_world_of_one_is_one_process_bitwise(gpu, dtype):
    plain, wrapped = _pair(gpu, dtype)
    ddp = DDP(wrapped, bucket_cap_mb=0.1)  # several buckets, on NCCL's side stream
    # the first bucket holds 1 MB whatever the cap, as PyTorch's: the seed CNN's 0.77 MB of
    # float32 fit in it, its 1.5 MB of float64 do not
    assert len(ddp.bucket_sizes) == 1 if dtype == "float32" else len(ddp.bucket_sizes) > 1
    for model, net in ((plain, plain), (wrapped, ddp)):
        opt = ndlite.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

        def step(x, y, net=net, opt=opt):
            opt.zero_grad()
            F.nll_loss(net(ndlite.tensor(x, backend=gpu)), ndlite.tensor(y, backend=gpu)) \
                .backward()
            opt.step()

        _train(model, 3, step)
    assert np.array_equal(_params(wrapped), _params(plain))


def test_a_cuda_graph_captured_ddp_step(gpu):
    from ndlite.cuda import Trainer

    plain, wrapped = _pair(gpu, "float32")
    eager_model = nn.models.mnist_cnn().to(backend=gpu)
    eager_model.load_state_dict(plain.state_dict())
    ddp = DDP(wrapped, bucket_cap_mb=0.1)
    trainers = [Trainer(net, ndlite.optim.Adam(net.parameters(), lr=1e-3), F.nll_loss)
                for net in (plain, ddp)]
    eager_opt = ndlite.optim.Adam(eager_model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    for _ in range(4):  # a warm-up step that records the graph, then replays
        x = rng.standard_normal((32, 1, 28, 28)).astype("float32")
        y = rng.integers(0, 10, 32)
        for trainer in trainers:
            trainer.step(x, y)
        eager_opt.zero_grad()
        F.nll_loss(eager_model(ndlite.tensor(x, backend=gpu)),
                   ndlite.tensor(y, backend=gpu)).backward()
        eager_opt.step()
    assert trainers[1].graph is not None
    assert np.array_equal(_params(wrapped), _params(plain))  # the same graph but for NCCL
    np.testing.assert_allclose(_params(wrapped), _params(eager_model), rtol=1e-4, atol=1e-6)


def test_two_ranks_on_one_gpu_are_refused_with_a_reason():
    _gpu()
    result = launch("nccl.py", "same-gpu", nproc=2, engine="nccl", timeout=300)
    assert result.returncode == 0, explain(result)
    assert result.stdout.count("REFUSED") == 2, explain(result)
    assert "NCCL needs one GPU per rank" in result.stdout


def test_two_gpus_match_one_process(tmp_path):
    backend = _gpu()
    count = backend.xp.cuda.runtime.getDeviceCount()
    if count < 2:
        pytest.skip(f"one rank per GPU needs 2 GPUs, this machine has {count}")
    result = launch("nccl.py", "ddp", tmp_path, nproc=2, engine="nccl", timeout=300)
    assert result.returncode == 0, explain(result)
    first, second = (np.load(tmp_path / f"rank{r}.npy") for r in range(2))
    assert np.array_equal(first, second)
    ndlite.manual_seed(100)
    model = nn.models.mnist_cnn().double()
    opt = ndlite.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(3):
        rng = np.random.default_rng(step)
        x, y = rng.standard_normal((16, 1, 28, 28)), rng.integers(0, 10, 16)
        opt.zero_grad()
        F.nll_loss(model(ndlite.tensor(x)), ndlite.tensor(y)).backward()
        opt.step()
    assert np.abs(first - _params(model)).max() <= 1e-10
