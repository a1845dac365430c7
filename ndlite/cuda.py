"""CUDA graphs: record a whole training step once on the CuPy backend, replay it each iteration.

An eager step of a small model spends most of its time launching kernels from Python; a
replayed graph launches them all with one call. Capture is opt-in:

    step = ndlite.cuda.capture(train_step, x, y, optimizers=[opt])
    for x, y in batches:            # NumPy arrays, or tensors on any backend
        loss = step(x, y)           # copies x, y into the graph's inputs, replays, returns loss

`train_step(x, y)` runs a whole step (zero_grad, forward, loss, backward, opt.step()) and
returns what it wants to read afterwards. The rules a captured step lives by (the backend's
graph.py says how each is enforced):
- inputs keep their shapes and dtypes (capture another step for a short last batch);
- nothing inside reads device values on the host (.item(), printing): return the tensors;
- nll_loss / cross_entropy labels must be inputs: they are checked on the host before each
  replay, since the graph cannot;
- optimizers are passed in `optimizers`, in the order the step calls them: before each replay
  their Python side runs (step counts, the current learning rate) without launching anything;
- the outputs and the parameters' `.grad` are the same tensors after every call.
`Trainer` does this for `ndlite train mnist --graph`. Importing this module imports no CuPy.

Recording is a capability of the backend: `backend.graph_recorder(host_inputs)` returns an
object that does the device work (static input buffers, the capture's stream and private
memory pool, recording, the hyperparameter table of the fused optimizer steps, the launch;
the backend's primitives refuse host reads while it records). This module does the tensor
work around it (`CapturedStep`): the static inputs as tensors, the parameters' `.grad`, the
optimizers' Python side before each replay.
"""

from __future__ import annotations

import time

import numpy as np

from .amp import cuda as amp  # noqa: F401 - torch.cuda.amp: autocast, GradScaler
from .creation import tensor
from .device.registry import current_backend, get_backend
from .dtypes import bfloat16
from .errors import BackendUnavailableError
from .tensor import Tensor

#: how many steps are being recorded right now (see `capturing`)
_recording = 0


def capture(step, *inputs, optimizers=(), warmup: int = 1, backend=None):
    """`step(*inputs)` recorded as a CUDA graph (after `warmup` eager calls, which are real
    steps on `inputs`); returns a callable that takes new inputs of the same shapes and dtypes,
    replays the step and returns its outputs. The recording itself computes nothing: the first
    call performs the recorded step (its optimizer state already counts that step).

    Runs on `backend`, else that of the first input on a backend that can record graphs, else
    that of the optimizers' parameters, else the current backend; it must be one that can
    (`graph_recorder`: the cupy backend)."""
    candidates = [x.backend for x in inputs if isinstance(x, Tensor)]
    candidates += [p.backend for opt in optimizers for g in opt.param_groups
                   for p in g["params"]]
    backend = get_backend(backend) if backend is not None else next(
        (c for c in candidates if _records(c)), None) or current_backend()
    if not _records(backend):
        raise BackendUnavailableError(
            "cuda", f"graph capture needs the cupy backend, and this step runs on "
                    f"{backend.name}", "select it with NDLITE_BACKEND=cupy or "
                                       "ndlite.set_backend('cupy')")
    if warmup < 0:
        raise ValueError(f"capture: warmup must be >= 0, got {warmup}")
    return CapturedStep(backend, step, inputs, optimizers, warmup)


def _records(backend) -> bool:
    return getattr(backend, "graph_recorder", None) is not None


def capturing() -> bool:
    """Whether a step is being recorded right now."""
    return _recording > 0


def defer_host_check(tensor, check) -> bool:
    """For code that checks a tensor's values on the host (nll_loss's labels): outside a
    capture, False (check now); inside one, `check` is run on the host values of the input
    that `tensor` is, now and before every replay, and the answer is True. This is the
    backend hook `defer_host_check(buffer, check)` (protocol.py) for a tensor."""
    return tensor.backend.defer_host_check(tensor.buffer, check)


class CapturedStep:
    """`step(*inputs)` recorded as a CUDA graph on `backend`; calling it with new inputs of the
    same shapes and dtypes replays the step and returns its outputs (the same tensors every
    call, updated in place). The backend's graph recorder does the device work (stream,
    memory pool, recording, the launch); this class does what concerns tensors: the static
    inputs as tensors, the parameters' `.grad`, the optimizers' Python side before a replay.
    See `capture`."""

    def __init__(self, backend, step, inputs, optimizers=(), warmup: int = 1):

        self.backend = backend
        self.optimizers = list(optimizers)
        self.recorder = recorder = backend.graph_recorder([_host_array(x) for x in inputs])
        self.inputs = [Tensor._make(buffer, backend) for buffer in recorder.inputs]
        params = [p for opt in self.optimizers for g in opt.param_groups for p in g["params"]]
        self.warmup_outputs = None  # what the last warm-up step returned
        with recorder.warmup():
            for _ in range(warmup):
                self.warmup_outputs = step(*self.inputs)
        before = [p.grad for p in params]
        self.outputs = self._record(step)
        self.grads = [(p, p.grad) for p in params if p.grad is not None]
        for p, grad in zip(params, before, strict=True):
            p.grad = grad  # the captured gradients hold values only after the first call
        if recorder.optimizer_updates and not self.optimizers:
            raise ValueError("ndlite.cuda.capture: the step updates parameters with an "
                             "optimizer; pass it as optimizers=[...] so that each replay gets "
                             "its current learning rate and step count")
        self._fresh = True  # the recording pass already ran the optimizers' Python side

    def _record(self, step):
        global _recording
        _recording += 1
        try:
            with self.recorder.record():
                return step(*self.inputs)
        finally:
            _recording -= 1

    def __call__(self, *inputs):

        recorder = self.recorder
        recorder.load([x.buffer if isinstance(x, Tensor) and x.backend is self.backend
                       else _host_array(x) for x in inputs])  # checks first: bad labels stop here
        if not self._fresh:
            for p, grad in self.grads:
                p.grad = grad
            with recorder.scalars_only():  # step counts, the current lr: no launches
                for opt in self.optimizers:
                    opt.step()
        self._fresh = False
        recorder.launch()
        for p, grad in self.grads:
            p.grad = grad
        return self.outputs


class Trainer:
    """Training steps of `model` with `optimizer` and `loss_fn(output, target)`, replayed from
    a CUDA graph: the first batch is a warm-up step (eager) that records the graph, later
    batches of the same shapes replay it, other shapes (a short last batch) run eagerly.

    >>> trainer = Trainer(model, optimizer, ndlite.nn.functional.nll_loss)  # doctest: +SKIP
    >>> stats = trainer.train_epoch(loader)                                  # doctest: +SKIP
    """

    def __init__(self, model, optimizer, loss_fn):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.graph = None
        self.key = None

    def _step(self, x, y):
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss

    def step(self, x, y):
        """One training step on (x, y) (tensors on any backend, or NumPy arrays); returns
        the loss tensor (the graph's own output tensor when replayed)."""
        key = (tuple(x.shape), str(x.dtype), tuple(y.shape), str(y.dtype))
        if self.graph is None:
            self.graph = capture(self._step, x, y, optimizers=[self.optimizer], warmup=1,
                                 backend=next(iter(self.model.parameters())).backend)
            self.key = key
            return self.graph.warmup_outputs  # the warm-up step's loss
        if key == self.key:
            return self.graph(x, y)
        backend = self.graph.backend
        return self._step(_on(x, backend), _on(y, backend))

    def train_epoch(self, loader, progress=None) -> dict:
        """One pass over `loader`, as `ndlite.cli.steps.train_epoch` (same statistics)."""
        self.model.train()
        total, images, start = 0.0, 0, time.perf_counter()
        for x, y in (progress if progress is not None else loader):
            value = self.step(x, y).item()
            total += value * len(y)
            images += len(y)
            if progress is not None:
                progress.set_postfix(loss=f"{value:.4f}", refresh=False)
        seconds = time.perf_counter() - start
        return {"loss": total / max(images, 1), "images": images, "seconds": seconds}


def _host_array(x) -> np.ndarray:
    """The host values of an input: a NumPy array, or a Tensor (copied off its device)."""

    if isinstance(x, Tensor):
        x = x.backend.to_numpy(x.buffer)
    return np.ascontiguousarray(x)


def _on(x, backend):

    if isinstance(x, Tensor):
        return x.to(backend)
    return tensor(x, backend=backend)


# ---- PyTorch's torch.cuda queries ------------------------------------------------------------


def is_available() -> bool:
    """Whether the CuPy backend can run here (CuPy installed, a CUDA device present)."""
    from .device.registry import probe

    return probe("cupy")[0] is not None


def device_count() -> int:
    """The number of CUDA devices the CuPy backend sees (0 without one)."""
    if not is_available():
        return 0
    return len(get_backend("cupy").info().get("devices", ())) or 1


def current_device() -> int:
    """The index of the CUDA device new CUDA tensors go to by default."""
    backend = current_backend()
    if backend.kind == "cupy":
        return int(backend.name.partition(":")[2] or 0)
    return 0


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the CuPy backend takes bfloat16 (ml_dtypes installed, CuPy >= 14, a device)."""
    if not isinstance(bfloat16, np.dtype):
        return False
    try:
        return bfloat16 in get_backend("cupy").dtypes
    except BackendUnavailableError:
        return False


def get_device_name(device=None) -> str:
    return get_backend("cupy" if device is None else
                       f"cupy:{device}" if isinstance(device, int) else device).device_name()


def synchronize(device=None) -> None:
    """Wait for queued work on the CUDA device (every started one without `device`)."""
    from .device.registry import synchronize as sync

    sync(None if device is None else f"cuda:{device}" if isinstance(device, int) else device)


def manual_seed(seed: int) -> None:
    """Same as ndlite.manual_seed: random numbers are drawn on the host for every backend."""
    from .creation import manual_seed as seed_all

    seed_all(seed)


manual_seed_all = manual_seed
