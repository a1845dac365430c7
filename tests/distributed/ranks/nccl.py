"""NCCL ranks, one GPU each (cupy:LOCAL_RANK), or all on cupy:0 to see the refusal.

    nccl.py ddp OUT        collectives, then float64 DDP steps saved to OUT/rank<R>.npy
    nccl.py same-gpu       every rank asks for cupy:0: init_process_group must refuse
"""

import os
import sys

import numpy as np

import ndlite
import ndlite.distributed as dist
import ndlite.nn.functional as F
from ndlite import nn
from ndlite.nn.parallel import DistributedDataParallel as DDP

mode = sys.argv[1]
local = int(os.environ["LOCAL_RANK"])
backend = ndlite.get_backend("cupy:0" if mode == "same-gpu" else f"cupy:{local}")
ndlite.set_backend(backend)
try:
    dist.init_process_group("nccl")
except dist.DistributedError as exc:
    sys.stdout.write(f"REFUSED {exc}\n")
    sys.exit(0)
rank, world = dist.get_rank(), dist.get_world_size()
for dtype in ("float32", "float64", "int32", "int64", "bool"):
    t = ndlite.tensor(np.arange(6) % 2 == rank if dtype == "bool" else np.arange(6) + rank,
                      dtype=dtype)
    dist.all_reduce(t)
    want = (np.arange(6) % 2 < world) if dtype == "bool" else \
        sum(np.arange(6) + r for r in range(world))
    assert np.array_equal(t.numpy(), np.asarray(want).astype(dtype)), (dtype, t.tolist())
ndlite.manual_seed(100 + rank)
model = nn.models.mnist_cnn().double()
ddp = DDP(model, bucket_cap_mb=0.1)
opt = ndlite.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
for step in range(3):
    rng = np.random.default_rng(step)
    x, y = rng.standard_normal((16, 1, 28, 28)), rng.integers(0, 10, 16)
    per = 16 // world
    opt.zero_grad()
    F.nll_loss(ddp(ndlite.tensor(x[rank * per:(rank + 1) * per])),
               ndlite.tensor(y[rank * per:(rank + 1) * per])).backward()
    opt.step()
np.save(f"{sys.argv[2]}/rank{rank}.npy",
        np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
dist.destroy_process_group()
