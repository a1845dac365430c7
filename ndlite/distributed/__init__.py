"""Data-parallel training across processes, with torch.distributed's names.

One process per device (a GPU, or a share of the CPU cores); each holds a replica of the
model, takes its share of every batch, and the ranks average their gradients so that every
replica takes the same step. Collectives run on existing engines, never a home-made one:

- `nccl`: NCCL through CuPy, for CuPy tensors (one GPU per rank);
- `mpi`: MPI through mpi4py (`pip install 'ndlite[mpi]'`), for NumPy tensors, and for OpenCL
  tensors through host memory.

    ndlite run --nproc-per-node 2 train.py          # or python -m ndlite.distributed.run

    import ndlite.distributed as dist
    dist.init_process_group()                       # nccl for cupy, mpi otherwise
    model = ndlite.nn.parallel.DistributedDataParallel(model)
    sampler = ndlite.data.DistributedSampler(dataset)

docs/distributed.md says how ranks are started, where each engine runs and what is
guaranteed.
"""

from .collectives import (
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    broadcast,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .errors import DistributedError
from .group import (
    barrier,
    destroy_process_group,
    get_backend,
    get_local_rank,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
)

__all__ = ["DistributedError", "ReduceOp", "all_gather", "all_gather_into_tensor",
           "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_backend",
           "get_local_rank", "get_rank", "get_world_size", "init_process_group",
           "is_available", "is_initialized", "is_mpi_available", "is_nccl_available",
           "reduce_scatter", "reduce_scatter_tensor"]
