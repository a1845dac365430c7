"""The MPI engine: collectives on NumPy arrays through mpi4py, for ranks on CPUs.

mpi4py drives whatever MPI it was built or installed for: `pip install 'ndlite[mpi]'` brings
MPICH as a wheel (its `mpiexec` lands beside the Python interpreter), a system MPI (Open MPI)
works too. The ranks must be started by that MPI's `mpiexec`, directly or through
`ndlite run`, which uses it: MPI cannot join separately started processes into one world.

Tensors of other backends (OpenCL, or CuPy when asked for MPI) reach it through host memory;
`ndlite.distributed.collectives` does that staging. Every call is non-blocking
(MPI_Iallreduce and friends) and every wait polls with a deadline, so a rank that stopped or
ranks that disagree end in a `DistributedError` after `timeout` seconds instead of a hang.
The engine works on its own duplicate of MPI_COMM_WORLD, so it never mixes its messages
with the application's own use of MPI.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from .errors import DistributedError

INSTALL = "pip install 'ndlite[mpi]' (mpi4py and the MPICH wheel)"

#: environment variables that MPI launchers set in each rank: (rank, size, local rank, local size)
LAUNCHER_VARIABLES = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),  # MPICH's hydra
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),  # Open MPI
)


def launched_rank() -> tuple[int, int, int, int] | None:
    """(rank, world size, local rank, local world size) from the variables an MPI launcher
    sets, read without initializing MPI; None outside mpiexec."""
    for rank, size, local_rank, local_size in LAUNCHER_VARIABLES:
        if rank in os.environ and size in os.environ:
            r, n = int(os.environ[rank]), int(os.environ[size])
            return (r, n, int(os.environ.get(local_rank, r)), int(os.environ.get(local_size, n)))
    return None


def import_mpi():
    """mpi4py.MPI (initializing MPI), or a DistributedError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistributedError(f"the mpi engine needs mpi4py, which is not installed ({exc}): "
                               f"{INSTALL}") from None
    except Exception as exc:  # noqa: BLE001 - e.g. no MPI library under the mpi4py wheel
        raise DistributedError(f"mpi4py failed to load an MPI library ({type(exc).__name__}: "
                               f"{exc}): {INSTALL}") from None
    return MPI


def mpiexec() -> str | None:
    """The `mpiexec` of the MPI that mpi4py uses: beside the interpreter (the MPICH wheel in
    a virtual environment), else on PATH; None if there is none."""
    import shutil

    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("mpiexec")


class Work:
    """Requests in flight; `wait()` polls them until done or `timeout` seconds, then runs
    the follow-ups (a division for AVG, a copy back to a tensor's device) in order."""

    def __init__(self, engine, requests: list, what: str):
        self.engine, self.requests, self.what = engine, requests, what
        self.followups: list = []
        self.done = not requests

    def then(self, fn) -> Work:
        if self.done:
            fn()
        else:
            self.followups.append(fn)
        return self

    def is_completed(self) -> bool:
        if not self.done and self.engine.MPI.Request.Testall(self.requests):
            self.wait()
        return self.done

    def wait(self, timeout: float | None = None) -> bool:
        if not self.done:
            self.engine.wait_requests(self.requests, self.what, timeout)
            self.done = True
            followups, self.followups = self.followups, []
            for fn in followups:
                fn()
        return True


class MPIEngine:
    """Collectives over MPI_COMM_WORLD (duplicated) on contiguous NumPy arrays."""

    name = "mpi"
    native = "numpy"  # the backend kind whose buffers go to MPI directly
    xp = np

    def __init__(self, timeout: float):
        MPI = import_mpi()
        self.MPI = MPI
        self.timeout = float(timeout)
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank, self.world_size = self.comm.Get_rank(), self.comm.Get_size()
        self.ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}

    def describe(self) -> str:
        version = self.MPI.Get_library_version().splitlines()[0].strip()
        return f"mpi ({version}, {self.world_size} ranks)"

    # ---- waiting ------------------------------------------------------------------------------

    def wait_requests(self, requests: list, what: str, timeout: float | None = None) -> None:
        """Poll until every request is done; spin for a moment, then sleep between polls."""
        limit = self.timeout if timeout is None else float(timeout)
        start = time.monotonic()
        pause = 0.0
        Testall = self.MPI.Request.Testall
        while not Testall(requests):
            waited = time.monotonic() - start
            if waited > limit:
                raise DistributedError(
                    f"{what}: rank {self.rank} waited {limit:g} s for the other ranks: one "
                    "of them stopped, or the ranks did not call the same collectives in the "
                    "same order")
            if waited > 0.002:
                pause = min(pause + 5e-5, 1e-3)
                time.sleep(pause)

    def progress(self, works: list) -> None:
        """Let MPI move outstanding messages along (it progresses only inside MPI calls)."""
        pending = [r for w in works for r in w.requests if not w.done]
        if pending:
            self.MPI.Request.Testall(pending)

    # ---- collectives (in place on contiguous arrays) -----------------------------------------

    def _operands(self, array: np.ndarray, op: str):
        """bool travels as bytes (MPI has no SUM on C_BOOL): SUM/MAX is OR, PROD/MIN is AND."""
        if array.dtype == np.bool_:
            return array.view(np.uint8), self.ops["max" if op in ("sum", "max") else "min"]
        return array, self.ops[op]

    def empty(self, shape: tuple, dtype) -> np.ndarray:
        return np.empty(shape, dtype)

    def divide(self, array: np.ndarray) -> None:
        """array /= world size, in place (AVG, gradient averaging)."""
        if self.world_size > 1:
            np.divide(array, self.world_size, out=array)

    def make_events(self) -> None:
        """No streams here (NCCL's engine makes two events per gradient bucket)."""
        return None

    def all_reduce(self, array: np.ndarray, op: str, events=None) -> Work:
        data, mpi_op = self._operands(array, op)
        return Work(self, [self.comm.Iallreduce(self.MPI.IN_PLACE, data, op=mpi_op)],
                    "all_reduce")

    def broadcast(self, array: np.ndarray, src: int) -> Work:
        data = array.view(np.uint8) if array.dtype == np.bool_ else array
        return Work(self, [self.comm.Ibcast(data, root=src)], "broadcast")

    def all_gather(self, out: np.ndarray, array: np.ndarray) -> Work:
        if array.dtype == np.bool_:
            out, array = out.view(np.uint8), array.view(np.uint8)
        return Work(self, [self.comm.Iallgather(array, out)], "all_gather")

    def reduce_scatter(self, out: np.ndarray, array: np.ndarray, op: str) -> Work:
        data, mpi_op = self._operands(array, op)
        target = out.view(np.uint8) if out.dtype == np.bool_ else out
        return Work(self, [self.comm.Ireduce_scatter_block(data, target, op=mpi_op)],
                    "reduce_scatter")

    def barrier(self) -> None:
        Work(self, [self.comm.Ibarrier()], "barrier").wait()

    def destroy(self) -> None:
        comm, self.comm = self.comm, None
        if comm is not None:
            comm.Free()
