"""CUDA graph capture of a whole training step on the CuPy backend (ndlite.cuda.capture).

A step is recorded once by CUDA stream capture and then replayed with one cudaGraphLaunch per
iteration, so ndlite's Python and CuPy's launch costs are paid once instead of every step.
What would break a replay, and how it is handled:
- host reads (to_numpy, .item(), a label check) cannot run inside a capture: the backend
  raises a clear error for them while recording, except for checks that ndlite.cuda defers:
  nll_loss's label check runs on the host copy of each call's inputs, before the replay;
- allocations: the step records with a private memory pool, used for nothing else, so the
  buffers the graph reads and writes are never handed to other code; inputs are copied into
  static buffers before each replay, and outputs are the same tensors each time;
- Python state that changes per step (optimizer step counts, the learning rate): the fused
  optimizer kernels read their hyperparameters from a table in device memory (optim.py);
  before each replay the optimizers' Python code runs in a "scalars only" mode that updates
  their state and refills the table, launching nothing; the parameters' .grad are the graph's
  gradient buffers again after each replay;
- lazy initialization (kernel compilation, cuBLAS workspaces) must not happen while
  recording: `warmup` eager steps run first, on the capture's stream and pool;
- CuPy refuses cuBLAS calls during a capture: matrix products are recorded through blas.py.
"""

from __future__ import annotations

import numpy as np

import ndlite.cuda
from ndlite.errors import ShapeError
from ndlite.tensor import Tensor

from . import blas

#: doubles per optimizer call in the hyperparameter table, and calls a capture can hold
SLOT = 16
CAPACITY = 1024


class HyperparameterTable:
    """Optimizer hyperparameters of a captured step: a host array, copied to the device
    before each replay, one slot per fused optimizer call in call order."""

    def __init__(self, cupy):
        self.host = np.zeros(SLOT * CAPACITY, dtype=np.float64)
        self.device = cupy.zeros(SLOT * CAPACITY, dtype=np.float64)
        self.slots = 0  # slots handed out while recording
        self.cursor = 0  # the next slot of a scalars-only pass
        self.recording = True

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
        if self.slots:
            self.device[:self.slots * SLOT].set(self.host[:self.slots * SLOT])


#: what each host-side primitive would do wrong inside a capture
REFUSED = {
    "to_numpy": "a captured step cannot read device values on the host (.item(), .tolist(), "
                ".numpy(), printing, host-side checks); return the tensors you need from the "
                "step and read them after each call",
    "synchronize": "a captured step cannot wait for the device",
    "from_numpy": "host data made inside a captured step (ndlite.tensor(...), a dropout mask, "
                  "an index list) would be frozen into the graph and reused by every replay; "
                  "make it outside the step and pass it in as an input",
}


def _refuse(name: str):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"cupy: {name} inside a CUDA graph capture: {REFUSED[name]}")

    return refuse


class CapturedStep:
    """`step(*inputs)` recorded as a CUDA graph; calling it with new inputs of the same shapes
    and dtypes replays the step and returns its outputs (the same tensors every call, updated
    in place). See ndlite.cuda.capture."""

    def __init__(self, backend, step, inputs, optimizers=(), warmup: int = 1):
        cupy = backend.xp
        self.backend = backend
        self.optimizers = list(optimizers)
        self._hosts = [_host_array(x) for x in inputs]
        self.inputs = [Tensor._make(backend.from_numpy(h), backend) for h in self._hosts]
        self.checks: list = []  # (input index, check of its host values)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.pool = cupy.cuda.MemoryPool()
        self.table = HyperparameterTable(cupy)
        params = [p for opt in self.optimizers for g in opt.param_groups for p in g["params"]]
        backend.synchronize()  # the static inputs and everything before are ready
        with cupy.cuda.using_allocator(self.pool.malloc), self.stream:
            self.warmup_outputs = None  # what the last warm-up step returned
            for _ in range(warmup):
                self.warmup_outputs = step(*self.inputs)
            self.stream.synchronize()
            before = [p.grad for p in params]
            self.outputs = self._record(step)
        self.grads = [(p, p.grad) for p in params if p.grad is not None]
        for p, grad in zip(params, before, strict=True):
            p.grad = grad  # the captured gradients hold values only after the first call
        if self.table.slots and not self.optimizers:
            raise ValueError("ndlite.cuda.capture: the step updates parameters with an "
                             "optimizer; pass it as optimizers=[...] so that each replay gets "
                             "its current learning rate and step count")
        self._fresh = True  # the recording pass already ran the optimizers' Python side

    def _record(self, step):
        backend, stream = self.backend, self.stream
        saved = {name: backend.__dict__.get(name) for name in (*REFUSED, "matmul")}
        for name in REFUSED:
            setattr(backend, name, _refuse(name))
        backend.matmul = blas.capturable_matmul  # CuPy refuses its own cuBLAS calls here
        backend._capture = self.table
        ndlite.cuda._active = self
        stream.begin_capture()
        try:
            outputs = step(*self.inputs)
        except BaseException:
            try:
                stream.end_capture()
            except Exception:  # noqa: BLE001 - an invalidated capture: the first error matters
                pass
            raise
        finally:
            ndlite.cuda._active = None
            backend._capture = None
            self.table.recording = False
            for name, value in saved.items():
                if value is None:
                    del backend.__dict__[name]
                else:
                    setattr(backend, name, value)
        self.graph = stream.end_capture()
        return outputs

    # ---- deferred host checks (ndlite.cuda.defer_host_check) ------------------------------

    def defer_check(self, tensor, check) -> None:
        """Run `check(host values)` on the input that `tensor` is, now and before each call."""
        for i, static in enumerate(self.inputs):
            if tensor._data is static._data:
                check(self._hosts[i])
                self.checks.append((i, check))
                return
        raise ValueError(
            f"ndlite.cuda.capture: a tensor of shape {tensor.shape} ({tensor.dtype}) that the "
            "step computes needs a check of its values on the host (class labels of nll_loss "
            "or cross_entropy): pass it to the step as an input, with its final dtype "
            "(int64 labels), so that it can be checked before each replay")

    # ---- replay -----------------------------------------------------------------------------

    def __call__(self, *inputs):
        if len(inputs) != len(self.inputs):
            raise TypeError(f"captured step: expected {len(self.inputs)} inputs, got "
                            f"{len(inputs)}")
        for i, (x, static) in enumerate(zip(inputs, self.inputs, strict=True)):
            if tuple(x.shape) != static.shape or np.dtype(x.dtype) != static.dtype:
                raise ShapeError(f"captured step: input {i} has shape {tuple(x.shape)} "
                                 f"({x.dtype}), but the step was captured for {static.shape} "
                                 f"({static.dtype}); capture another step for other shapes")
        for i, check in self.checks:
            check(_host_array(inputs[i]))
        for x, static in zip(inputs, self.inputs, strict=True):
            if isinstance(x, Tensor) and x._backend is self.backend:
                self.backend.xp.copyto(static._data, x._data)
            else:
                static._data.set(_host_array(x))
        if not self._fresh:
            self._scalars_pass()
        self._fresh = False
        self.table.upload()
        self.graph.launch()
        for p, grad in self.grads:
            p.grad = grad
        return self.outputs

    def _scalars_pass(self) -> None:
        """The optimizers' Python side of one step: state updates and the table's values."""
        for p, grad in self.grads:
            p.grad = grad
        table = self.table
        table.cursor = 0
        self.backend._capture = table
        try:
            for opt in self.optimizers:
                opt.step()
        finally:
            self.backend._capture = None
        if table.cursor != table.slots:
            raise RuntimeError(f"captured step: the optimizers updated {table.cursor} "
                               f"parameters, {table.slots} when the step was captured")


def _host_array(x) -> np.ndarray:
    """The host values of an input: a NumPy array, or a Tensor (copied off its device)."""
    if isinstance(x, Tensor):
        x = x._backend.to_numpy(x._data)
    return np.ascontiguousarray(x)
