"""Scratch buffers that the NumPy backend's fast paths reuse from call to call.

A training step allocates and frees the same large temporaries (im2col columns, transposed
inputs) every time. glibc returns freed memory at the top of the heap to the OS once it exceeds
a trim threshold that depends on the sizes seen so far, so whether each step page-faults tens
of megabytes in afresh depends on the history of allocation sizes: splitting one 26 MB buffer
into two 13 MB halves was enough to cost ~7,000 page faults a step (docs/DESIGN.md). Keeping
the temporaries makes that cost go away for good, as PyTorch's oneDNN scratchpad does.

The cache is per calling thread (two threads calling ndlite never share a buffer), least
recently used first out, and bounded: at most LIMIT bytes, and no buffer larger than a quarter
of it (those are allocated afresh). Never return a scratch buffer to a caller: results are
allocated with np.empty.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

#: bytes of scratch kept per calling thread
LIMIT = 256 << 20

_local = threading.local()


def buffer(tag, shape: tuple, dtype, *, zeroed: bool = False) -> np.ndarray:
    """A buffer of this shape and dtype, reused by later calls with the same tag.

    zeroed=True: all zeros when created; a caller that writes only part of it (the interior of a
    padded image) may rely on the rest staying zero from call to call."""
    dtype = np.dtype(dtype)
    key = (tag, tuple(shape), dtype)
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = OrderedDict()
    buf = cache.pop(key, None)
    if buf is None:
        buf = (np.zeros if zeroed else np.empty)(shape, dtype=dtype)
        if buf.nbytes > LIMIT // 4:
            return buf
        _local.bytes = getattr(_local, "bytes", 0) + buf.nbytes
        while _local.bytes > LIMIT:
            _local.bytes -= cache.popitem(last=False)[1].nbytes
    cache[key] = buf
    return buf


def clear() -> None:
    """Release this thread's scratch buffers."""
    _local.cache, _local.bytes = OrderedDict(), 0


def settle_malloc() -> None:
    """Let glibc keep the backend's mid-sized arrays on the heap from the start.

    glibc serves each allocation at least as large as its mmap threshold with a fresh mmap,
    page-faulted in on first use and returned to the OS on free, and raises the threshold to
    the size of the largest such block freed so far, up to 32 MiB. A CNN's activations (a few
    MB each) sit above the initial 128 KiB threshold, so until some larger block has been freed,
    every one of them costs a round of page faults each step: with the big temporaries kept in
    scratch, nothing large is freed any more and the seed CNN took ~1,800 page faults a step
    (bench: faults 1,835/step -> 0). Freeing one block just under the cap puts glibc at once in
    the state its own heuristic would reach; elsewhere it is just an allocation and a free."""
    np.empty(31 << 20, dtype=np.uint8)
