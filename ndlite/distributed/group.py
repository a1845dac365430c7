"""The default process group: which engine carries the collectives, this process's rank and
the number of ranks (torch.distributed's init_process_group and friends).

Where the ranks come from:
- `ndlite run` (or torchrun) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
  in each rank's environment;
- `mpiexec` sets its own variables (PMI_RANK, OMPI_COMM_WORLD_RANK, ...), and MPI knows its
  world;
- with neither, the process is a world of one.
The engine: `nccl` when ndlite's current backend is CuPy, `mpi` otherwise (`backend=` picks).
MPI's world is what mpiexec started; NCCL's ranks meet through rank 0's TCP store on
MASTER_ADDR:MASTER_PORT (or through MPI when mpiexec started them), which is closed again once
the communicator exists.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
import time

from .errors import DistributedError

#: seconds a rank waits for the others in a rendezvous or a collective (torch: 30 minutes)
DEFAULT_TIMEOUT = 1800.0
ENGINES = ("mpi", "nccl")


class _Group:
    def __init__(self, engine, local_rank: int, previous_excepthook=None):
        self.engine, self.local_rank = engine, local_rank
        self.previous_excepthook = previous_excepthook


_default: _Group | None = None


def _timeout_seconds(timeout) -> float:
    if timeout is None:
        return float(os.environ.get("NDLITE_DIST_TIMEOUT", DEFAULT_TIMEOUT))
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise DistributedError(f"init_process_group: {name}={value!r} is not an integer") \
            from None


def _launch_layout(rank, world_size) -> tuple[int, int, int]:
    """(rank, world size, local rank): explicit arguments, else torchrun's variables, else
    an MPI launcher's, else a world of one."""
    from .mpi import launched_rank

    mpi = launched_rank()
    env_rank, env_world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is None:
        rank = env_rank if env_rank is not None else (mpi[0] if mpi else 0)
    if world_size is None:
        world_size = env_world if env_world is not None else (mpi[1] if mpi else 1)
    local = _env_int("LOCAL_RANK")
    if local is None:
        local = mpi[2] if mpi else rank
    if world_size < 1 or not 0 <= rank < world_size:
        raise DistributedError(f"init_process_group: rank {rank} is not in a world of "
                               f"{world_size}: RANK must be 0 to WORLD_SIZE - 1")
    return rank, world_size, local


def init_process_group(backend: str | None = None, *, rank: int | None = None,
                       world_size: int | None = None, timeout=None, device=None) -> None:
    """Join this process to the job's ranks. `backend` is the engine, "nccl" or "mpi"
    (default: nccl if ndlite's current backend is CuPy, else mpi); `device` the CuPy backend
    NCCL works on (default: the current backend); `timeout` (seconds or a timedelta) bounds
    every wait for other ranks. Rank and world size come from the environment (see the
    module's docstring) unless given.

    >>> import ndlite.distributed as dist
    >>> dist.init_process_group("mpi")              # doctest: +SKIP
    >>> dist.get_rank(), dist.get_world_size()      # doctest: +SKIP
    (0, 1)
    """
    global _default
    if _default is not None:
        raise DistributedError("init_process_group: the default process group is already "
                               "initialized; call destroy_process_group() first")
    from ..device.registry import current_backend, get_backend

    seconds = _timeout_seconds(timeout)
    if backend is None:
        backend = "nccl" if (device is not None or current_backend().kind == "cupy") else "mpi"
    backend = str(backend).lower()
    if backend not in ENGINES:
        hint = "; for CPU ranks use 'mpi'" if backend == "gloo" else ""
        raise DistributedError(f"init_process_group: unknown engine {backend!r}: ndlite has "
                               f"'nccl' (CuPy tensors) and 'mpi' (any backend){hint}")
    if backend == "mpi":
        engine, local = _init_mpi(rank, world_size, seconds)
        hook = _abort_on_uncaught_exception(engine) if engine.world_size > 1 else None
        _default = _Group(engine, local, hook)
        return
    rank, world_size, local = _launch_layout(rank, world_size)
    device = get_backend(device) if device is not None else current_backend()
    if device.kind != "cupy":
        raise DistributedError(f"init_process_group('nccl'): NCCL runs on CuPy tensors, and "
                               f"the device is {device.name}: select cupy:LOCAL_RANK first "
                               "(ndlite.set_backend(f'cupy:{local_rank}')), or use 'mpi'")
    from .nccl import NCCLEngine

    comm_id = _nccl_rendezvous(rank, world_size, device, seconds)
    _default = _Group(NCCLEngine(device, rank, world_size, comm_id, seconds), local)


def _init_mpi(rank, world_size, seconds):
    from .mpi import MPIEngine, launched_rank

    engine = MPIEngine(seconds)
    wanted = world_size if world_size is not None else _env_int("WORLD_SIZE")
    if wanted is not None and wanted != engine.world_size:
        engine.destroy()
        raise DistributedError(
            f"init_process_group('mpi'): {wanted} ranks were asked for (WORLD_SIZE or "
            f"world_size=) but MPI's world has {engine.world_size}: processes started "
            "separately cannot form an MPI world; start them with mpiexec, or with `ndlite run "
            "--engine mpi`, which uses it")
    wanted = rank if rank is not None else _env_int("RANK")
    if wanted is not None and wanted != engine.rank:
        engine.destroy()
        raise DistributedError(f"init_process_group('mpi'): rank {wanted} was asked for but "
                               f"MPI numbers this process {engine.rank}")
    layout = launched_rank()
    local = _env_int("LOCAL_RANK")
    if local is None:
        local = layout[2] if layout else engine.rank
    return engine, local


#: seconds between printing an uncaught exception and MPI_Abort: hydra forwards a rank's
#: output asynchronously, and an abort right after the print lost it (seen in CI)
ABORT_GRACE = 0.5


def _abort_on_uncaught_exception(engine):
    """Under a bare mpiexec, a rank that dies of an exception would leave the others waiting
    in their next collective (hydra does not stop them): print it, then MPI_Abort the job,
    as `python -m mpi4py` does. Returns the hook it replaced."""
    previous = sys.excepthook

    def abort(kind, value, traceback):
        previous(kind, value, traceback)
        sys.stderr.flush()
        time.sleep(ABORT_GRACE)  # the process manager forwards our stderr before it kills us
        engine.MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort
    return previous


def _nccl_rendezvous(rank: int, world_size: int, device, seconds: float) -> bytes:
    """NCCL's unique id from rank 0, after checking that no two ranks share a GPU."""
    from .nccl import unique_id

    if world_size == 1:
        return unique_id()
    gpu = device.xp.cuda.Device(int(device.name.split(":")[1]))
    me = f"{socket.gethostname()} {gpu.pci_bus_id}"
    addr, port = os.environ.get("MASTER_ADDR"), _env_int("MASTER_PORT")
    if addr and port:
        from .store import TCPStore

        store = TCPStore(addr, port, world_size, is_master=rank == 0, timeout=seconds)
        try:
            if rank == 0:
                store.set("nccl/id", unique_id())
            store.set(f"nccl/device/{rank}", me.encode())
            comm_id = store.get("nccl/id")
            devices = [store.get(f"nccl/device/{r}").decode() for r in range(world_size)]
            store.barrier("nccl/ready")  # everyone has read everything: rank 0 may close
        finally:
            store.close()
    else:
        from .mpi import import_mpi, launched_rank

        if launched_rank() is None:
            raise DistributedError(
                f"init_process_group('nccl'): {world_size} ranks but no way to meet them: set "
                "MASTER_ADDR and MASTER_PORT (ndlite run does), or start the ranks with mpiexec")
        world = import_mpi().COMM_WORLD
        comm_id = world.bcast(unique_id() if rank == 0 else None, root=0)
        devices = world.allgather(me)
    seen: dict[str, int] = {}
    for r, where in enumerate(devices):
        if where in seen:
            raise DistributedError(
                f"init_process_group('nccl'): ranks {seen[where]} and {r} both use the GPU "
                f"{where.split()[1]} on {where.split()[0]}; NCCL needs one GPU per rank: "
                "select cupy:LOCAL_RANK in each rank (ndlite.set_backend(f'cupy:{local_rank}'))")
        seen[where] = r
    return comm_id


def destroy_process_group(group=None) -> None:
    """Leave the process group: free the engine's communicator (MPI itself stays up until
    exit, as mpi4py finalizes it then)."""
    global _default
    _check_group(group, "destroy_process_group")
    current, _default = _default, None
    if current is None:
        return
    if current.previous_excepthook is not None:
        sys.excepthook = current.previous_excepthook
    current.engine.destroy()


def _check_group(group, what: str) -> None:
    if group is not None:
        raise DistributedError(f"{what}: only the default group (group=None) exists in ndlite")


def engine_of(group=None, what: str = "this call"):
    """The engine of the default group, or a DistributedError saying to initialize it."""
    _check_group(group, what)
    if _default is None:
        raise DistributedError(f"{what}: the default process group is not initialized; call "
                               "ndlite.distributed.init_process_group() first")
    return _default.engine


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return _default is not None


def is_mpi_available() -> bool:
    """Whether mpi4py is installed (checked without starting MPI)."""
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


def is_nccl_available() -> bool:
    try:
        from .nccl import import_nccl

        import_nccl()
    except DistributedError:
        return False
    return True


def get_rank(group=None) -> int:
    return engine_of(group, "get_rank").rank


def get_world_size(group=None) -> int:
    return engine_of(group, "get_world_size").world_size


def get_backend(group=None) -> str:
    """The engine's name: "mpi" or "nccl"."""
    return engine_of(group, "get_backend").name


def get_local_rank() -> int:
    """This rank's number among the ranks of its host (LOCAL_RANK)."""
    engine_of(None, "get_local_rank")
    return _default.local_rank


def barrier(group=None) -> None:
    """Wait until every rank has called barrier()."""
    engine_of(group, "barrier").barrier()
