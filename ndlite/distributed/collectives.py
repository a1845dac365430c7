"""Collectives on ndlite tensors of any backend and dtype (torch.distributed's names).

Each call hands the engine a contiguous array it can use directly: the tensor's own buffer
when the tensor lives where the engine works (NumPy for MPI, the group's GPU for NCCL) and
is contiguous, else a staging copy (through host memory for OpenCL tensors under MPI: no
OpenCL collective library exists), written back into the tensor when the collective is done.
Results are written into the tensors given, in place, as torch does.

Dtype rules (torch's NCCL rules, on every engine): bool all-reduces as logical OR under SUM
and MAX and as AND under PRODUCT and MIN; AVG needs a floating tensor (it is SUM, then a
division by the world size).
"""

from __future__ import annotations

import enum

import numpy as np

from .. import bounds
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .errors import DistributedError
from .group import engine_of


class ReduceOp(enum.Enum):
    """How all_reduce and reduce_scatter combine the ranks' values."""

    SUM = "sum"
    PRODUCT = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"


def wrap(buffer, backend) -> Tensor:
    """A tensor around an engine's array (no copy): the one place ndlite.distributed and
    DistributedDataParallel make tensors from buffers."""
    return Tensor._make(buffer, backend)


def _reduce_op(op, dtype, what: str) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        try:
            op = ReduceOp[str(op).upper()]
        except KeyError:
            raise ValueError(f"{what}: unknown reduction {op!r}; use ndlite.distributed."
                             f"ReduceOp.{'/'.join(ReduceOp.__members__)}") from None
    if op is ReduceOp.AVG and not is_floating(np.dtype(dtype)):
        raise DTypeError(f"{what}: ReduceOp.AVG needs a floating tensor, not {np.dtype(dtype)}; "
                         "reduce with SUM and divide")
    return op


def _check_place(engine, tensor: Tensor, what: str) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what}: expected an ndlite Tensor, got {type(tensor).__name__}")
    backend = tensor.backend
    if engine.native == "cupy" and backend.name != engine.backend.name:
        raise DistributedError(
            f"{what}: the nccl engine of this process works on {engine.backend.name}, and this "
            f"tensor lives on {backend.name}: move it there (tensor.to("
            f"'{engine.backend.name}')), or use the mpi engine for tensors of other backends")


class _Staged:
    """A tensor's values as a contiguous array of the engine's kind, and the way back."""

    def __init__(self, engine, tensor: Tensor, what: str, read: bool = True):
        _check_place(engine, tensor, what)
        bounds.forget(tensor)  # written in place by the engine, no version bump (bounds.py)
        self.engine, self.tensor = engine, tensor
        backend, buffer = tensor.backend, tensor.buffer
        if backend.kind == engine.native:
            self.copied = not buffer.flags.c_contiguous
            if not self.copied:
                self.array = buffer
            else:
                self.array = engine.empty(buffer.shape, buffer.dtype)
                if read:
                    backend.assign(self.array, buffer)
        else:  # host staging (the mpi engine, for OpenCL or CuPy tensors)
            self.copied = True
            self.array = (np.array(backend.to_numpy(buffer), order="C", copy=True) if read
                          else np.empty(tensor.shape, tensor.dtype))

    def write_back(self) -> None:
        if self.copied:
            store(self.engine, self.tensor, self.array)


def store(engine, tensor: Tensor, array) -> None:
    """Write an engine array into `tensor`'s memory (through the host for other backends)."""
    backend = tensor.backend
    if backend.kind != engine.native:
        array = backend.from_numpy(np.ascontiguousarray(array))
    backend.assign(tensor.buffer, array)


def _finish(work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` over all ranks, in place, with `op` (a ReduceOp). With async_op, a
    work object whose wait() completes it; else None, and the result is there.

    >>> dist.all_reduce(t, op=dist.ReduceOp.SUM)   # doctest: +SKIP
    """
    engine = engine_of(group, "all_reduce")
    op = _reduce_op(op, tensor.dtype, "all_reduce")
    staged = _Staged(engine, tensor, "all_reduce")
    work = engine.all_reduce(staged.array, "sum" if op is ReduceOp.AVG else op.value)
    if op is ReduceOp.AVG:
        work.then(lambda: engine.divide(staged.array))
    work.then(staged.write_back)
    return _finish(work, async_op)


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Copy rank `src`'s `tensor` into `tensor` on every other rank."""
    engine = engine_of(group, "broadcast")
    if not 0 <= int(src) < engine.world_size:
        raise ValueError(f"broadcast: src {src} is not a rank of a world of {engine.world_size}")
    staged = _Staged(engine, tensor, "broadcast")
    return _finish(engine.broadcast(staged.array, int(src)).then(staged.write_back), async_op)


def _check_same(tensors, like: Tensor, what: str, count: int, role: str) -> None:
    if len(tensors) != count:
        raise ValueError(f"{what}: {role} must hold one tensor per rank ({count}), got "
                         f"{len(tensors)}")
    for i, t in enumerate(tensors):
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise ShapeError(f"{what}: {role}[{i}] is {tuple(t.shape)} {t.dtype}, but the "
                             f"tensor is {tuple(like.shape)} {like.dtype}")


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """tensor_list[r] = rank r's `tensor`, on every rank."""
    engine = engine_of(group, "all_gather")
    _check_same(tensor_list, tensor, "all_gather", engine.world_size, "tensor_list")
    for t in tensor_list:
        _check_place(engine, t, "all_gather")
    staged = _Staged(engine, tensor, "all_gather")
    out = engine.empty((engine.world_size, *tensor.shape), tensor.dtype)

    def scatter_out():
        for r, t in enumerate(tensor_list):
            store(engine, t, out[r])

    return _finish(engine.all_gather(out, staged.array).then(scatter_out), async_op)


def _check_stacked(big: Tensor, small: Tensor, world: int, what: str) -> None:
    shapes = [(world * small.shape[0], *small.shape[1:])] if small.ndim else []
    shapes.append((world, *small.shape))
    if big.dtype != small.dtype or tuple(big.shape) not in shapes:
        raise ShapeError(f"{what}: expected a tensor of shape "
                         f"{' or '.join(map(str, shapes))} ({small.dtype}) for {world} ranks, "
                         f"got {tuple(big.shape)} ({big.dtype})")


def all_gather_into_tensor(output: Tensor, input: Tensor, group=None, async_op: bool = False):
    """`output` = the ranks' `input`s concatenated (or stacked) along dim 0."""
    engine = engine_of(group, "all_gather_into_tensor")
    _check_stacked(output, input, engine.world_size, "all_gather_into_tensor")
    source = _Staged(engine, input, "all_gather_into_tensor")
    target = _Staged(engine, output, "all_gather_into_tensor", read=False)
    work = engine.all_gather(target.array, source.array).then(target.write_back)
    return _finish(work, async_op)


def reduce_scatter(output: Tensor, input_list: list, op=ReduceOp.SUM, group=None,
                   async_op: bool = False):
    """`output` on rank r = the reduction over ranks of their input_list[r]."""
    engine = engine_of(group, "reduce_scatter")
    op = _reduce_op(op, output.dtype, "reduce_scatter")
    _check_same(input_list, output, "reduce_scatter", engine.world_size, "input_list")
    stacked = engine.empty((engine.world_size, *output.shape), output.dtype)
    for r, t in enumerate(input_list):
        _check_place(engine, t, "reduce_scatter")
        if t.backend.kind == engine.native:
            t.backend.assign(stacked[r], t.buffer)
        else:
            stacked[r] = t.backend.to_numpy(t.buffer)
    return _reduce_scatter(engine, output, stacked, op, async_op)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op=ReduceOp.SUM, group=None,
                          async_op: bool = False):
    """`output` on rank r = the reduction over ranks of the r-th block (along dim 0) of their
    `input`s."""
    engine = engine_of(group, "reduce_scatter_tensor")
    op = _reduce_op(op, output.dtype, "reduce_scatter_tensor")
    _check_stacked(input, output, engine.world_size, "reduce_scatter_tensor")
    return _reduce_scatter(engine, output, _Staged(engine, input, "reduce_scatter_tensor").array,
                           op, async_op)


def _reduce_scatter(engine, output, stacked, op: ReduceOp, async_op: bool):
    target = _Staged(engine, output, "reduce_scatter", read=False)
    work = engine.reduce_scatter(target.array, stacked,
                                 "sum" if op is ReduceOp.AVG else op.value)
    if op is ReduceOp.AVG:
        work.then(lambda: engine.divide(target.array))
    return _finish(work.then(target.write_back), async_op)
