"""Every collective on every dtype and every backend this machine has (MPI engine), checked
on each rank against what the ranks contributed; results must also be bitwise the same on
every rank. Prints "CHECKED rank R: N checks on BACKENDS" at the end."""

import sys

import numpy as np

import ndlite
import ndlite.distributed as dist
from ndlite.device.registry import probe
from ndlite.distributed import ReduceOp

DTYPES = ["float32", "float64", "int32", "int64", "bool"]
SHAPE = (3, 5)

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
checks = 0


def contribution(r: int, dtype: str, shape=SHAPE, salt: int = 0) -> np.ndarray:
    rng = np.random.default_rng(1000 * salt + r)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-4, 5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def reduced(arrays: list, op: ReduceOp, dtype: str) -> np.ndarray:
    stack = np.stack(arrays)
    if dtype == "bool":  # torch's rule: SUM and MAX are OR, PRODUCT and MIN are AND
        return stack.any(0) if op in (ReduceOp.SUM, ReduceOp.MAX) else stack.all(0)
    wide = stack.astype(np.float64 if dtype.startswith("float") else np.int64)
    out = {ReduceOp.SUM: wide.sum(0), ReduceOp.AVG: wide.sum(0) / world,
           ReduceOp.PRODUCT: wide.prod(0), ReduceOp.MAX: wide.max(0),
           ReduceOp.MIN: wide.min(0)}[op]
    return out


def same_on_every_rank(t, what: str) -> None:
    gathered = [ndlite.zeros_like(t) for _ in range(world)]
    dist.all_gather(gathered, t)
    mine = t.numpy()
    for r, other in enumerate(gathered):
        assert np.array_equal(other.numpy(), mine, equal_nan=mine.dtype.kind == "f"), \
            f"{what}: rank {r} holds other bits than rank {rank}"


def check(got: np.ndarray, want: np.ndarray, dtype: str, what: str, terms=None) -> None:
    global checks
    checks += 1
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype}, expected {dtype}"
    if dtype.startswith("float"):
        eps = np.finfo(dtype).eps  # n terms: at most n roundings of their magnitudes
        scale = np.abs(np.stack(terms)).sum(0) if terms is not None else np.abs(want)
        bound = 8 * world * eps * scale + 8 * np.finfo(dtype).tiny
        assert (np.abs(got - want) <= bound).all(), f"{what}: {got} vs {want}"
    else:
        assert np.array_equal(got, want.astype(dtype)), f"{what}: {got} vs {want}"


def run(backend) -> None:
    for dtype in DTYPES:
        if np.dtype(dtype) not in backend.dtypes:
            continue
        where = f"{backend.name} {dtype}"
        mine = contribution(rank, dtype)
        everyone = [contribution(r, dtype) for r in range(world)]
        ops = [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MAX, ReduceOp.MIN]
        if dtype.startswith("float"):
            ops.append(ReduceOp.AVG)
        for op in ops:
            t = ndlite.tensor(mine, backend=backend)
            dist.all_reduce(t, op=op)
            terms = [np.abs(a).astype(np.float64) for a in everyone] if op in (
                ReduceOp.SUM, ReduceOp.AVG) else None
            check(t.numpy(), reduced(everyone, op, dtype), dtype, f"all_reduce {op.name} {where}",
                  terms)
            same_on_every_rank(t, f"all_reduce {op.name} {where}")
            # async, and in place through a non-contiguous view
            base = ndlite.tensor(np.ascontiguousarray(mine.T), backend=backend)
            work = dist.all_reduce(base.T, op=op, async_op=True)
            work.wait()
            check(base.numpy().T, reduced(everyone, op, dtype), dtype,
                  f"all_reduce {op.name} of a view {where}", terms)
        for src in range(world):
            t = ndlite.tensor(mine, backend=backend)
            dist.broadcast(t, src)
            check(t.numpy(), everyone[src], dtype, f"broadcast from {src} {where}")
        outs = [ndlite.zeros(SHAPE, dtype=dtype, backend=backend) for _ in range(world)]
        dist.all_gather(outs, ndlite.tensor(mine, backend=backend))
        for r in range(world):
            check(outs[r].numpy(), everyone[r], dtype, f"all_gather [{r}] {where}")
        big = ndlite.zeros((world * SHAPE[0], SHAPE[1]), dtype=dtype, backend=backend)
        dist.all_gather_into_tensor(big, ndlite.tensor(mine, backend=backend))
        check(big.numpy(), np.concatenate(everyone), dtype, f"all_gather_into_tensor {where}")
        # reduce_scatter: rank r's input list holds one block per destination rank
        blocks = {(r, d): contribution(r, dtype, salt=d + 1) for r in range(world)
                  for d in range(world)}
        for op in ops:
            out = ndlite.zeros(SHAPE, dtype=dtype, backend=backend)
            dist.reduce_scatter(out, [ndlite.tensor(blocks[rank, d], backend=backend)
                                      for d in range(world)], op=op)
            column = [blocks[r, rank] for r in range(world)]
            terms = [np.abs(a).astype(np.float64) for a in column] if op in (
                ReduceOp.SUM, ReduceOp.AVG) else None
            check(out.numpy(), reduced(column, op, dtype), dtype,
                  f"reduce_scatter {op.name} {where}", terms)
            stacked = ndlite.tensor(np.concatenate([blocks[rank, d] for d in range(world)]),
                                    backend=backend)
            out = ndlite.zeros(SHAPE, dtype=dtype, backend=backend)
            dist.reduce_scatter_tensor(out, stacked, op=op)
            check(out.numpy(), reduced(column, op, dtype), dtype,
                  f"reduce_scatter_tensor {op.name} {where}", terms)


names = []
for spec in ("numpy", "opencl", "cupy"):
    backend, _ = probe(spec)
    if backend is not None:
        run(backend)
        names.append(backend.name)
dist.barrier()
# errors every rank raises the same way
for bad, kind in [(lambda: dist.all_reduce(ndlite.tensor([1, 2]), op=ReduceOp.AVG), TypeError),
                  (lambda: dist.broadcast(ndlite.zeros(2), src=world), ValueError),
                  (lambda: dist.all_gather([ndlite.zeros(2)] * (world + 1), ndlite.zeros(2)),
                   ValueError),
                  (lambda: dist.init_process_group("mpi"), dist.DistributedError),
                  (lambda: dist.all_reduce(ndlite.zeros(2), op="median"), ValueError)]:
    try:
        bad()
    except kind:
        checks += 1
    else:
        raise AssertionError(f"no {kind.__name__} from a bad call")
dist.destroy_process_group()
assert not dist.is_initialized()
# one write of a whole line: the ranks share the launcher's stdout
sys.stdout.write(f"CHECKED rank {rank}: {checks} checks on {', '.join(names)}\n")
