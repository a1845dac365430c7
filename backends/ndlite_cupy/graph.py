"""CUDA graphs on the CuPy backend: the backend's side of ndlite.cuda.capture.

A step is recorded once by CUDA stream capture and then replayed with one cudaGraphLaunch per
iteration, so ndlite's Python and CuPy's launch costs are paid once instead of every step.
The core (ndlite.cuda) drives a capture through one object the backend hands out,
`backend.graph_recorder(host_inputs)`, which knows CuPy buffers and NumPy arrays only, never
tensors or optimizers:

    recorder = backend.graph_recorder([x0, y0])  # static input buffers holding x0, y0
    with recorder.warmup():                      # eager steps, on the capture's stream and pool
        step(*recorder.inputs)
    with recorder.record():                      # the step is recorded; nothing is computed
        outputs = step(*recorder.inputs)
    recorder.load([x, y])                        # deferred checks, then copy into the inputs
    with recorder.scalars_only():                # optimizer steps write their hyperparameters
        opt.step()                               # into the table and launch nothing
    recorder.launch()                            # the table goes up, the graph runs

What would break a replay, and how the backend handles it:
- host reads: while recording, the backend's own to_numpy, synchronize and from_numpy raise a
  clear error (REFUSED). A check that can wait goes through `backend.defer_host_check(buffer,
  check)`: the buffer must be one of the static inputs, and `check(host values)` runs now and
  on each later call's values in `load`, before anything is copied or launched;
- allocations: the step records with a private memory pool, used for nothing else, so the
  buffers the graph reads and writes are never handed to other code;
- Python state that changes per step (optimizer step counts, the learning rate): the fused
  optimizer kernels read their hyperparameters from a table in device memory while recorded
  (optim.py); `scalars_only` lets the optimizers' Python side refill it before a replay;
- lazy initialization (kernel compilation, cuBLAS workspaces) must not happen while
  recording: the core runs warm-up steps first, inside `warmup()`;
- CuPy refuses cuBLAS calls during a capture: while recording, the backend's matmul sends 2-D
  products through blas.py, which cuBLAS records fine.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from ndlite.device import ShapeError

#: doubles per optimizer call in the hyperparameter table, and calls a capture can hold
SLOT = 16
CAPACITY = 1024

#: what each host-side primitive would do wrong inside a capture
REFUSED = {
    "to_numpy": "a captured step cannot read device values on the host (.item(), .tolist(), "
                ".numpy(), printing, host-side checks); return the tensors you need from the "
                "step and read them after each call",
    "synchronize": "a captured step cannot wait for the device",
    "from_numpy": "host data made inside a captured step (ndlite.tensor(...), a dropout mask, "
                  "an index list) would be frozen into the graph and reused by every replay; "
                  "make it outside the step and pass it in as an input",
    "dropout": "a dropout mask's seed would be frozen into the graph, so every replay would drop "
               "the same elements; record the step in eval mode (model.eval()) or without dropout",
}


def refused(name: str) -> RuntimeError:
    """The error for host primitive `name` called while a graph is recorded."""
    return RuntimeError(f"cupy: {name} inside a CUDA graph capture: {REFUSED[name]}")


class HyperparameterTable:
    """Optimizer hyperparameters of a captured step: a host array, copied to the device
    before each replay, one slot per fused optimizer call in call order (optim.py)."""

    def __init__(self, cupy):
        self.host = np.zeros(SLOT * CAPACITY, dtype=np.float64)
        self.device = cupy.zeros(SLOT * CAPACITY, dtype=np.float64)
        self.slots = 0  # slots handed out while recording
        self.cursor = 0  # the next slot of a scalars-only pass
        self.recording = False
        self.sent = None  # the bytes the device holds, after an upload

    def hyperparameters(self, values: tuple):
        """Store `values` in the next slot; while recording, the device slot the kernel reads,
        else (a scalars-only pass) None."""
        if self.recording:
            k = self.slots
            if k >= CAPACITY:
                raise RuntimeError(f"ndlite.cuda.capture: more than {CAPACITY} optimizer "
                                   "updates in one step")
            self.slots += 1
        else:
            k = self.cursor
            if k >= self.slots:
                raise RuntimeError("ndlite.cuda.capture: the optimizers update more parameters "
                                   f"than when the step was captured ({self.slots})")
            self.cursor += 1
        self.host[k * SLOT:k * SLOT + len(values)] = values
        return self.device[k * SLOT:(k + 1) * SLOT] if self.recording else None

    def upload(self) -> None:
        """Copy the table to the device, unless it holds these bits already (a constant
        learning rate and no step counts: every replay but the first; a copy from pageable
        memory waits on the host, ~20 us)."""
        if self.slots:
            values = self.host[:self.slots * SLOT]
            sent = values.tobytes()
            if sent != self.sent:
                self.device[:self.slots * SLOT].set(values)
                self.sent = sent


class GraphRecorder:
    """One step's CUDA graph on `backend`, with static input buffers holding `host_inputs`
    (NumPy arrays) to start with. See the module docstring for the order of the calls."""

    def __init__(self, backend, host_inputs):
        cupy = backend.xp
        self.backend = backend
        self._hosts = [np.ascontiguousarray(h) for h in host_inputs]  # for checks at record
        with backend._device:
            self.inputs = [backend.from_numpy(h) for h in self._hosts]
            # page-locked copies of the inputs: a replay's host batch goes there, then to the
            # device without the host waiting for the transfer; an event per input says when
            # its copy is read
            self._pinned = [np.frombuffer(cupy.cuda.alloc_pinned_memory(max(h.nbytes, 1)),
                                          h.dtype, h.size).reshape(h.shape)
                            for h in self._hosts]
            self._copied = [cupy.cuda.Event(disable_timing=True) for _ in self._hosts]
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.pool = cupy.cuda.MemoryPool()
            self.table = HyperparameterTable(cupy)
        self.checks: list = []  # (input index, check of its host values)
        self.graph = None
        backend.synchronize()  # the static inputs and everything before are ready

    @property
    def optimizer_updates(self) -> int:
        """Fused optimizer calls the recorded step makes (slots of the table)."""
        return self.table.slots

    @contextmanager
    def _on_stream(self):
        cupy = self.backend.xp
        with self.backend._device, cupy.cuda.using_allocator(self.pool.malloc), self.stream:
            yield

    @contextmanager
    def warmup(self):
        """Eager work on the capture's stream and private pool (the warm-up steps)."""
        with self._on_stream():
            yield
            self.stream.synchronize()

    @contextmanager
    def record(self):
        """Record what runs inside as the graph: the backend refuses host reads, defers host
        checks and routes matmul through blas.py meanwhile (backend.py)."""
        backend = self.backend
        if self.graph is not None or backend._recording is not None:
            raise RuntimeError("ndlite.cuda.capture: a step is already recorded here")
        with self._on_stream():
            backend._recording, backend._optimizer_table = self, self.table
            self.table.recording = True
            self.stream.begin_capture()
            try:
                yield
            except BaseException:
                try:
                    self.stream.end_capture()
                except Exception:  # noqa: BLE001 - an invalidated capture: the first error matters
                    pass
                raise
            finally:
                backend._recording = backend._optimizer_table = None
                self.table.recording = False
            self.graph = self.stream.end_capture()

    @contextmanager
    def scalars_only(self):
        """The optimizers' Python side of one step, before a replay: their fused steps write
        the table and launch nothing; they must make the calls they made when recorded."""
        table = self.table
        table.cursor = 0
        self.backend._optimizer_table = table
        try:
            yield
        finally:
            self.backend._optimizer_table = None
        if table.cursor != table.slots:
            raise RuntimeError(f"captured step: the optimizers updated {table.cursor} "
                               f"parameters, {table.slots} when the step was captured")

    def defer_check(self, buffer, check) -> None:
        """Run `check(host values)` on the static input that `buffer` is, now and in each
        `load` (backend.defer_host_check while recording)."""
        for i, static in enumerate(self.inputs):
            if _same_array(buffer, static):
                check(self._hosts[i])
                self.checks.append((i, check))
                return
        raise ValueError(
            f"ndlite.cuda.capture: an array of shape {buffer.shape} ({buffer.dtype}) that the "
            "step computes needs a check of its values on the host (class labels of nll_loss "
            "or cross_entropy): pass it to the step as an input, with its final dtype "
            "(int64 labels), so that it can be checked before each replay")

    def load(self, values) -> None:
        """New inputs (CuPy arrays on this device or NumPy arrays, of the recorded shapes and
        dtypes): the deferred checks run on them first, then they are copied in, on the
        current stream, where `launch` replays: replay a captured step from one stream (a
        copy on another could overwrite an input a replay still reads)."""
        if len(values) != len(self.inputs):
            raise TypeError(f"captured step: expected {len(self.inputs)} inputs, got "
                            f"{len(values)}")
        for i, (x, static) in enumerate(zip(values, self.inputs, strict=True)):
            if tuple(x.shape) != static.shape or np.dtype(x.dtype) != static.dtype:
                raise ShapeError(f"captured step: input {i} has shape {tuple(x.shape)} "
                                 f"({x.dtype}), but the step was captured for {static.shape} "
                                 f"({static.dtype}); capture another step for other shapes")
        cupy = self.backend.xp
        with self.backend._device:
            for i, check in self.checks:
                x = values[i]
                check(x.get() if isinstance(x, cupy.ndarray) else np.asarray(x))
            stream = cupy.cuda.get_current_stream()
            for x, static, pinned, copied in zip(values, self.inputs, self._pinned,
                                                 self._copied, strict=True):
                if isinstance(x, cupy.ndarray):
                    cupy.copyto(static, x)
                elif static.nbytes:
                    copied.synchronize()  # the previous replay's copy has read it
                    np.copyto(pinned, x, casting="no")
                    static.data.copy_from_host_async(pinned.ctypes.data, static.nbytes, stream)
                    copied.record(stream)

    def launch(self) -> None:
        """Replay the graph on the loaded inputs, with the table's current values."""
        with self.backend._device:
            self.table.upload()
            self.graph.launch()


def _same_array(a, b) -> bool:
    """Whether two CuPy arrays are the same elements (one array, or views alike)."""
    return a is b or (a.data.ptr == b.data.ptr and a.shape == b.shape
                      and a.dtype == b.dtype and a.strides == b.strides)
