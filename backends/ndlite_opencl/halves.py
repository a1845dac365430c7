"""float16 and bfloat16 on the OpenCL backend: stored in half, computed in float32.

The elementwise `map` kernel, the reductions, log_softmax and nll_loss, the transformer paths
(layer_norm, causal_softmax, embedding_grad, dropout_mask), batch_norm and the fused optimizer
steps read and write halves themselves, through the LOAD/STORE macros of kernels/common.cl
(kernels.slot): each value is computed in float and rounded once when stored, so + - * / sqrt
are the correctly rounded half results, bitwise as the NumPy reference; sums accumulate in
float32. `gather` and `put` move a half's bits as ushort (indexing.py). The other kernel
families (gemm, conv, pooling) are not written for halves: `install` wraps them so a half
call converts its half buffers to float32 (one `map` launch each), runs the float32 kernel and
rounds the results once to the half: PyTorch's rule and ndlite.device.halfmath's, at the cost
of the conversions. Where a native path takes the core's fallback (views, sizes its kernel
does not take), `core` runs that on float32 copies too.
"""

from __future__ import annotations

import numpy as np

from ndlite.device.halfmath import CONTRACTIONS, IN_PLACE, KEEP_FLOAT32

from .array import CLArray
from .kernels import STORAGE

#: computed natively in half (the map kernel, the reductions, the transformer paths, losses)
NATIVE = ("sum", "erf", "math", "math2", "log_softmax", "causal_softmax", "causal_softmax_grad",
          "dropout_mask", "layer_norm", "layer_norm_grad", "embedding_grad", "nll_loss",
          "nll_loss_grad", "batch_norm", "batch_norm_grad")
#: the backend methods that run on float32 copies of their half buffers (the optimizer steps
#: are native: optim.py)
FALLBACK = tuple(n for n in CONTRACTIONS if n not in NATIVE) + ("max_pool2d",)
_FLOAT32 = np.dtype("float32")


#: the halves' dtypes, tested by identity (the backend's dtypes are DTYPES' own objects)
IDS = tuple(STORAGE)


def install(b) -> bool:
    """Wrap `b`'s FALLBACK methods (as instance attributes) with `in_float32`. The backend
    calls this when it makes its first half buffer, so that a program without halves does
    not pay the wrappers' dtype test (about 1 us a call)."""
    for name in FALLBACK:
        setattr(b, name, in_float32(b, getattr(b, name), name))
    return True


def core(b, fallback, *args):
    """The core's `fallback`(b, *args); with halves on float32 copies, rounded once (an
    in-place step's buffers written back)."""
    if _half_of(args) is not None:
        fallback = in_float32(b, fallback, fallback.__name__)
    return fallback(b, *args)


def _half_of(values):
    for v in values:
        dtype = v.dtype if isinstance(v, CLArray) else v if isinstance(v, np.dtype) else None
        if dtype in STORAGE:
            return dtype
    return None


def in_float32(b, fn, name: str):
    """`fn` run on float32 copies of its half buffers, its float32 results rounded once."""
    keep = KEEP_FLOAT32.get(name, ())
    in_place = name in IN_PLACE

    def up(v):
        if isinstance(v, CLArray) and v.dtype in STORAGE:
            return b.astype(v, _FLOAT32)
        return _FLOAT32 if isinstance(v, np.dtype) and v in STORAGE else v

    def down(out, half, i=-1):
        if isinstance(out, tuple):
            return tuple(down(o, half, j) for j, o in enumerate(out))
        if isinstance(out, CLArray) and out.dtype == _FLOAT32 and i not in keep:
            return b.astype(out, half)
        return out

    def call(*args, **kwargs):
        half = _half_of(args) or (_half_of(kwargs.values()) if kwargs else None)
        if half is None:
            return fn(*args, **kwargs)
        wide_args = [up(a) for a in args]
        wide_kwargs = {k: up(v) for k, v in kwargs.items()}
        out = fn(*wide_args, **wide_kwargs)
        if in_place:  # the updated float32 buffers back into the half ones, rounded once
            pairs = [*zip(args, wide_args), *((kwargs[k], wide_kwargs[k]) for k in kwargs)]
            for original, wide in pairs:
                if wide is not original and isinstance(original, CLArray):
                    b.assign(original, wide)
        return down(out, half)

    call.__name__ = call.__qualname__ = name
    call.__wrapped__ = fn
    return call


def host_view(array: np.ndarray) -> np.ndarray:
    """A host array as PyOpenCL can copy it: a half as its 16-bit patterns."""
    return array.view(np.uint16) if array.dtype in STORAGE else array


def fill_pattern(value, dtype: np.dtype) -> np.ndarray:
    """A fill pattern: `value` rounded once to the half, as its bits (its kernels take numbers
    as float32, a fill takes bytes)."""
    with np.errstate(over="ignore"):
        return host_view(np.asarray(value).astype(dtype))


def bits(x: CLArray) -> CLArray:
    """The same view of a half buffer as uint16 (for kernels that only move values)."""
    return CLArray(x.data, x.shape, np.dtype(np.uint16), x.strides, x.offset, x.wide)


def as_half(x: CLArray, dtype: np.dtype) -> CLArray:
    """A uint16 view of `bits` labelled as the half `dtype` again."""
    return CLArray(x.data, x.shape, dtype, x.strides, x.offset, x.wide)
