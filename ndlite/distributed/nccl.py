"""The NCCL engine: collectives on CuPy arrays of one GPU per rank, through cupy.cuda.nccl.

CuPy (13.5 and later) finds libnccl in the nvidia-nccl-cu12 / -cu13 wheels by itself. One
communicator per process group is made with ncclCommInitRank from NCCL's 128-byte unique id,
which rank 0 creates and hands to the others through the rendezvous (`group.py`: the TCP
store, or MPI when the ranks were started by mpiexec). cupyx.distributed is not used: it has
no bfloat16 and leaves its TCP store running, which can deadlock at exit.

Collectives are queued on the current CUDA stream, so they are ordered with the kernels
around them and the host does not wait (torch's NCCL semantics). DistributedDataParallel
asks for its gradient buckets to go on a side stream instead (`events` given): the side
stream waits for an event recorded on the current stream, runs the all-reduce, records a
second event, and `Work.wait()` makes the current stream wait for that one, so the reduction
overlaps with the rest of backward. All of this can be recorded in a CUDA graph.
"""

from __future__ import annotations

import time

import numpy as np

from .errors import DistributedError

INSTALL = ("NCCL comes with the nvidia-nccl-cu12 or nvidia-nccl-cu13 wheel (matching CuPy's "
           "CUDA), which CuPy 13.5+ finds by itself: pip install nvidia-nccl-cu12")


def import_nccl():
    try:
        from cupy.cuda import nccl
    except Exception as exc:  # noqa: BLE001 - no CuPy, or a CuPy without NCCL support
        raise DistributedError(f"the nccl engine needs CuPy with NCCL ({type(exc).__name__}: "
                               f"{exc}); {INSTALL}") from None
    if not getattr(nccl, "available", True):
        raise DistributedError(f"CuPy found no NCCL library; {INSTALL}")
    return nccl


def unique_id() -> bytes:
    """A new NCCL unique id as 128 bytes (CuPy gives a tuple of signed chars)."""
    return bytes(c & 0xFF for c in import_nccl().get_unique_id())


def _communicator(nccl, world_size: int, comm_id: bytes, rank: int):
    """ncclCommInitRank: CuPy 14 takes the id as bytes, older CuPy as a tuple of signed chars."""
    try:
        return nccl.NcclCommunicator(world_size, comm_id, rank)
    except TypeError:
        return nccl.NcclCommunicator(world_size, tuple(b - 256 if b > 127 else b
                                                       for b in comm_id), rank)


class Work:
    """A collective queued on a stream. Without an event it ran on the current stream and
    is already ordered before later work; with one, `wait()` makes the current stream wait
    for it (the host never blocks). Follow-ups (the division of AVG, copies back to a
    tensor) are queued on the current stream once the collective is ordered before them."""

    def __init__(self, engine, done_event=None):
        self.engine, self.event = engine, done_event
        self.followups: list = []
        self.done = done_event is None

    def then(self, fn) -> Work:
        if self.done:
            fn()
        else:
            self.followups.append(fn)
        return self

    def is_completed(self) -> bool:
        return self.event.done if self.event is not None else True

    def wait(self, timeout: float | None = None) -> bool:
        if not self.done:
            with self.engine.device:
                self.engine.xp.cuda.get_current_stream().wait_event(self.event)
            self.done = True
            followups, self.followups = self.followups, []
            for fn in followups:
                fn()
        return True


class NCCLEngine:
    """Collectives over one NCCL communicator, on CuPy arrays of the backend's device."""

    name = "nccl"
    native = "cupy"

    def __init__(self, backend, rank: int, world_size: int, comm_id: bytes, timeout: float):
        nccl = import_nccl()
        self.nccl, self.backend, self.xp = nccl, backend, backend.xp
        self.rank, self.world_size, self.timeout = rank, world_size, float(timeout)
        cupy = self.xp
        self.device = cupy.cuda.Device(int(backend.name.split(":")[1]))
        self.dtypes = {np.dtype(np.float32): nccl.NCCL_FLOAT32,
                       np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.float16): nccl.NCCL_FLOAT16,
                       np.dtype(np.int32): nccl.NCCL_INT32,
                       np.dtype(np.int64): nccl.NCCL_INT64,
                       np.dtype(np.int8): nccl.NCCL_INT8,
                       np.dtype(np.uint8): nccl.NCCL_UINT8}
        self.ops = {"sum": nccl.NCCL_SUM, "prod": nccl.NCCL_PROD, "max": nccl.NCCL_MAX,
                    "min": nccl.NCCL_MIN}
        with self.device:
            self.comm = _communicator(nccl, world_size, comm_id, rank)
            self.side = cupy.cuda.Stream(non_blocking=True)  # DDP's buckets
            self.scratch = cupy.zeros(1, dtype=np.float32)  # the barrier's all-reduce

    def describe(self) -> str:
        version = self.nccl.get_version()
        text = f"{version // 10000}.{version // 100 % 100}.{version % 100}"
        return f"nccl (NCCL {text}, {self.world_size} ranks, {self.backend.name})"

    # ---- helpers ------------------------------------------------------------------------------

    def _dtype(self, array) -> int:
        try:
            return self.dtypes[np.dtype(array.dtype)]
        except KeyError:
            raise DistributedError(f"nccl: no NCCL type for {array.dtype}") from None

    def _operands(self, array, op: str):
        """bool travels as uint8: SUM/MAX is OR, PROD/MIN is AND (as torch maps them)."""
        if array.dtype == np.bool_:
            return array.view(np.uint8), self.ops["max" if op in ("sum", "max") else "min"]
        return array, self.ops[op]

    def _current(self):
        return self.xp.cuda.get_current_stream()

    def empty(self, shape: tuple, dtype):
        with self.device:
            return self.xp.empty(shape, dtype)

    def divide(self, array) -> None:
        """array /= world size, in place, queued on the current stream."""
        if self.world_size > 1:
            with self.device:
                self.xp.divide(array, self.world_size, out=array)

    def make_events(self) -> tuple:
        """Two events for one side-stream reduction (made ahead: none inside a graph capture)."""
        Event = self.xp.cuda.Event
        with self.device:
            return Event(block=False, disable_timing=True), Event(block=False,
                                                                  disable_timing=True)

    def wait_stream(self, stream, what: str) -> None:
        """Block the host until `stream` is idle, at most `timeout` seconds."""
        event = self.xp.cuda.Event(block=False, disable_timing=True)
        event.record(stream)
        start = time.monotonic()
        while not event.done:
            if time.monotonic() - start > self.timeout:
                self.comm.check_async_error()
                raise DistributedError(
                    f"{what}: rank {self.rank} waited {self.timeout:g} s for the other ranks: "
                    "one of them stopped, or the ranks did not call the same collectives in "
                    "the same order")
            time.sleep(1e-4)

    # ---- collectives (in place on contiguous arrays) -----------------------------------------

    def all_reduce(self, array, op: str, events=None) -> Work:
        data, nccl_op = self._operands(array, op)
        ptr = data.data.ptr
        with self.device:
            if events is None:
                self.comm.allReduce(ptr, ptr, data.size, self._dtype(data), nccl_op,
                                    self._current().ptr)
                return Work(self)
            ready, done = events
            ready.record(self._current())
            self.side.wait_event(ready)
            self.comm.allReduce(ptr, ptr, data.size, self._dtype(data), nccl_op, self.side.ptr)
            done.record(self.side)
            return Work(self, done)

    def broadcast(self, array, src: int) -> Work:
        data = array.view(np.uint8) if array.dtype == np.bool_ else array
        with self.device:
            self.comm.broadcast(data.data.ptr, data.data.ptr, data.size, self._dtype(data), src,
                                self._current().ptr)
        return Work(self)

    def all_gather(self, out, array) -> Work:
        if array.dtype == np.bool_:
            out, array = out.view(np.uint8), array.view(np.uint8)
        with self.device:
            self.comm.allGather(array.data.ptr, out.data.ptr, array.size, self._dtype(array),
                                self._current().ptr)
        return Work(self)

    def reduce_scatter(self, out, array, op: str) -> Work:
        data, nccl_op = self._operands(array, op)
        target = out.view(np.uint8) if out.dtype == np.bool_ else out
        with self.device:
            self.comm.reduceScatter(data.data.ptr, target.data.ptr, target.size,
                                    self._dtype(data), nccl_op, self._current().ptr)
        return Work(self)

    def barrier(self) -> None:
        with self.device:
            stream = self._current()
            self.comm.allReduce(self.scratch.data.ptr, self.scratch.data.ptr, 1,
                                self.nccl.NCCL_FLOAT32, self.nccl.NCCL_SUM, stream.ptr)
            self.wait_stream(stream, "barrier")

    def progress(self, works: list) -> None:
        """Nothing to do: the GPU moves NCCL's work along by itself."""

    def destroy(self) -> None:
        comm, self.comm = self.comm, None
        if comm is None:
            return
        with self.device:
            try:
                self.wait_stream(self._current(), "destroy_process_group")
                self.wait_stream(self.side, "destroy_process_group")
            except DistributedError:
                comm.abort()  # peers gone: do not wait for them in ncclCommDestroy
                raise
        comm.destroy()
