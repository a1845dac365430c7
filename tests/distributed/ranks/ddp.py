"""DistributedDataParallel scenarios on the MPI engine; each rank saves what it saw to
OUT/rank<R>.npz (arrays) and OUT/rank<R>.json (error messages, bucket sizes), and the test
compares them with one process (test_ddp.py builds the same batches: `batches`).

    ddp.py OUT
"""

import json
import sys

import numpy as np

import ndlite
import ndlite.distributed as dist
import ndlite.nn.functional as F
from ndlite import nn
from ndlite.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH, STEPS = 16, 3


def batches(step: int, dtype="float64"):
    """The global batch of `step` (the test makes the same ones)."""
    rng = np.random.default_rng(step)
    return (rng.standard_normal((GLOBAL_BATCH, 1, 28, 28)).astype(dtype),
            rng.integers(0, 10, GLOBAL_BATCH))


def share(array, rank, world):
    per = len(array) // world
    return array[rank * per:(rank + 1) * per]


def params_of(model):
    return np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])


def grads_of(model):
    return np.concatenate([p.grad.numpy().ravel() for p in model.parameters()])


def main(out: str) -> None:
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    arrays, notes = {}, {}

    # 1. float64 SGD with momentum, several buckets, replicas seeded differently
    ndlite.manual_seed(100 + rank)  # DDP must replace this by rank 0's values
    model = nn.models.mnist_cnn().double()
    ddp = DDP(model, bucket_cap_mb=0.1)
    notes["bucket_sizes"] = ddp.bucket_sizes
    arrays["initial"] = params_of(model)
    opt = ndlite.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        x, y = batches(step)
        opt.zero_grad()
        F.nll_loss(ddp(ndlite.tensor(share(x, rank, world))),
                   ndlite.tensor(share(y, rank, world))).backward()
        opt.step()
    arrays["sgd_grads"] = grads_of(model)
    arrays["sgd_params"] = params_of(model)

    # 2. no_sync: the first micro-batch accumulates locally, the second reduces the sum
    ndlite.manual_seed(0)
    model = nn.models.mnist_cnn().double()
    ddp = DDP(model)
    with ddp.no_sync():
        x, y = batches(10)
        F.nll_loss(ddp(ndlite.tensor(share(x, rank, world))),
                   ndlite.tensor(share(y, rank, world))).backward()
    arrays["no_sync_local"] = grads_of(model)
    x, y = batches(11)
    F.nll_loss(ddp(ndlite.tensor(share(x, rank, world))),
               ndlite.tensor(share(y, rank, world))).backward()
    arrays["no_sync_grads"] = grads_of(model)

    # 3. float32 gradients of one step (judged by the kit's scaled rule)
    ndlite.manual_seed(0)
    model = nn.models.mnist_cnn()
    ddp = DDP(model)
    x, y = batches(20, "float32")
    F.nll_loss(ddp(ndlite.tensor(share(x, rank, world))),
               ndlite.tensor(share(y, rank, world))).backward()
    arrays["float32_grads"] = grads_of(model)

    # 4. a parameter that takes no part in the forward: an error at once, on every rank
    class WithSpare(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.spare = nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x):
            return self.used(x)

    spare = DDP(WithSpare())
    try:
        spare(ndlite.ones(2, 4))
    except dist.DistributedError as exc:
        notes["unused"] = str(exc)
    with ndlite.no_grad():
        spare(ndlite.ones(2, 4))  # no gradient wanted: no complaint

    # 5. a parameter used outside the DDP module gets a second gradient: an error
    inner = nn.Linear(4, 2)
    outside = DDP(inner)
    try:
        (outside(ndlite.ones(2, 4)).sum() + (inner.weight * inner.weight).sum()).backward()
    except dist.DistributedError as exc:
        notes["extra_use"] = str(exc)

    # 6. backward from part of the output: the next forward says what was not reduced
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x):
            return self.a(x), self.b(x)

    heads = DDP(TwoHeads())
    first, _ = heads(ndlite.ones(2, 4))
    first.sum().backward()
    try:
        heads(ndlite.ones(2, 4))
    except dist.DistributedError as exc:
        notes["partial"] = str(exc)
    heads(ndlite.ones(2, 4))  # the error cleared the state

    # 7. buffers: rank 0's at construction and before each forward; batch statistics per rank
    ndlite.manual_seed(rank)
    bn_model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    bn_model[1].running_mean.fill_(float(rank + 1))
    bn = DDP(bn_model)
    arrays["bn_built"] = bn_model[1].running_mean.numpy().copy()
    rng = np.random.default_rng(rank)
    bn(ndlite.tensor(rng.standard_normal((8, 4)).astype("float32"))).sum().backward()
    arrays["bn_after_forward"] = bn_model[1].running_mean.numpy().copy()

    # 8. OpenCL tensors, reduced through host memory
    backend, why = ndlite.device.registry.probe("opencl")
    notes["opencl"] = why
    if backend is not None:
        ndlite.manual_seed(0)
        mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(backend)
        ddp = DDP(mlp)
        opt = ndlite.optim.SGD(ddp.parameters(), lr=0.1)
        for step in range(STEPS):
            rng = np.random.default_rng(30 + step)
            x = rng.standard_normal((GLOBAL_BATCH, 8)).astype("float32")
            opt.zero_grad()
            pred = ddp(ndlite.tensor(share(x, rank, world), backend=backend))
            (pred * pred).mean().backward()
            opt.step()
        arrays["opencl_params"] = params_of(mlp)

    np.savez(f"{out}/rank{rank}.npz", **arrays)
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(notes, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
