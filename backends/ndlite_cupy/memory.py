"""Device memory for the CuPy backend: CuPy's memory pool, with ndlite's out-of-memory rule.

Buffers come from CuPy's default memory pool (freed buffers stay cached in it for reuse, so
an allocation seldom reaches cudaMalloc). When an allocation fails, ndlite frees the pool's
cached blocks and retries once; if that fails too it raises ndlite's OutOfMemoryError naming
the requested and free sizes. The error is also CuPy's OutOfMemoryError, so code that catches
either keeps working.

The rule is installed as CuPy's allocator, process-wide (CuPy has one allocator per process),
and only over CuPy's own default pool: an allocator the user set (RMM, managed memory) is kept.
"""

from __future__ import annotations

import cupy
from cupy.cuda.memory import OutOfMemoryError as CupyOutOfMemoryError

from ndlite.device import OutOfMemoryError


class CudaOutOfMemoryError(OutOfMemoryError, CupyOutOfMemoryError):
    """Out of device memory after freeing the pool's cache and retrying once."""

    def __init__(self, message: str):
        MemoryError.__init__(self, message)  # CuPy's __init__ wants (size, total)


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def out_of_memory(requested: int, pool) -> CudaOutOfMemoryError:
    """The error for a failed allocation of `requested` bytes on the current device."""
    device = cupy.cuda.Device()
    free, total = device.mem_info
    limit = pool.get_limit()
    message = (f"cupy:{device.id}: out of memory allocating {requested:,} bytes "
               f"({_gib(requested)}) after freeing the memory pool's cache and retrying once; "
               f"{free:,} bytes ({_gib(free)}) free of {_gib(total)} on the device, "
               f"{pool.used_bytes():,} bytes in use by CuPy's pool")
    if limit:
        message += f" (pool limit {limit:,} bytes)"
    return CudaOutOfMemoryError(message)


def _pooled_malloc(pool):
    malloc = pool.malloc

    def allocate(size: int):
        try:
            return malloc(size)
        except CupyOutOfMemoryError:
            pass
        # CuPy frees unsplit cached blocks before giving up on cudaMalloc, but not when a pool
        # limit is what refused: free the whole cache here and retry once.
        pool.free_all_blocks()
        try:
            return malloc(size)
        except CupyOutOfMemoryError:
            raise out_of_memory(size, pool) from None

    allocate.pool = pool
    return allocate


def install() -> object:
    """Route CuPy's allocations through the pool with ndlite's OOM rule; returns the pool."""
    pool = cupy.get_default_memory_pool()
    get_allocator = getattr(cupy.cuda.memory, "get_allocator", None)  # CuPy >= 9
    current = get_allocator() if get_allocator else None
    if getattr(current, "pool", None) is pool:
        return pool  # already installed
    if current is None or current == pool.malloc:
        cupy.cuda.set_allocator(_pooled_malloc(pool))
    return pool
