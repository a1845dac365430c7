"""The batch-norm fast paths of the CuPy backend (protocol.py; the specification is
ndlite/device/norm_fallbacks.py), on the kernels in kernels/norm.cu.

x (N, C, *) is seen as (N, C, S). Each channel's N * S values are cut into K chunks of at
least CHUNK_MIN (at most CHUNKS chunks): K depends on the shape alone, so the sums' order and
the bits are the same run to run, and a few channels of many values (ResNet's first layers:
64 channels of 32 * 112 * 112) still fill the GPU with C * K blocks.
- batch_norm: a block per (channel, chunk): its mean and sum of squares about it; a thread per
  channel combines the chunks in order (mean, var, invstd); one pass for y over the planes
  (n, c), a block fitted to the plane size S;
- batch_norm_grad: a block per (channel, chunk): the sums of grad and grad * xhat; a thread
  per channel adds the chunks in order (grad_bias, grad_weight); one pass for grad_x.
No kernel divides per element (integer division would bound these memory-bound passes).
Three launches each way, no atomics; batch_norm_update is one elementwise kernel over the
channels for both running statistics, its products and sums rounded one by one (no fused
multiply-add), as the fallback's. Halves come here as float32 (half.py wraps the
contractions; mean, invstd and var stay float32). Empty tensors and non-float dtypes take
the fallbacks. Every function takes the backend `b` first.
"""

from __future__ import annotations

import math
from functools import cache

import cupy

from ndlite.device import norm_fallbacks as nfb

from . import kernels
from .kernels import launch
from .nn import FLOATS, _covered, _index

#: the fewest values of a channel one block sums, and the most chunks per channel
CHUNK_MIN, CHUNKS = 4096, 256
#: threads per block of the chunk kernels (NDL_BN_THREADS in norm.cu), and the most blocks
THREADS, MAX_BLOCKS = 256, 65536
KERNELS = ("ndl_bn_chunk_stats", "ndl_bn_stats", "ndl_bn_normalize", "ndl_bn_chunk_grad",
           "ndl_bn_grad_sums", "ndl_bn_grad_input")


@cache
def _raw():
    return kernels.RawKernels("norm", KERNELS, KERNELS)


def _kernel(name: str, dtype, index: str):
    return _raw().get(name, FLOATS[dtype], index)


def chunks(m: int) -> tuple[int, int]:
    """(per, K): a channel of m values in K chunks of `per` (the last shorter)."""
    per = max(CHUNK_MIN, -(-m // CHUNKS))
    return per, -(-m // per)


def _geometry(x):
    n, c = x.shape[0], x.shape[1]
    s = math.prod(x.shape[2:])
    per, k = chunks(n * s)
    return n, c, s, per, k


def _blocks(function, count: int, args: tuple) -> None:
    """Launch a chunk kernel: a block of THREADS per chunk, striding past MAX_BLOCKS."""
    function((min(count, MAX_BLOCKS),), (THREADS,), args)


def _planes(function, planes: int, s: int, args: tuple) -> None:
    """Launch a plane kernel: blocks of THREADS as (tx, ty), tx the power of two that covers a
    plane of s values (at most THREADS), ty planes side by side."""
    tx = min(THREADS, 1 << max(s - 1, 0).bit_length())
    ty = THREADS // tx
    function((min(-(-planes // ty), MAX_BLOCKS),), (tx, ty), args)


def _dense(t):
    return None if t is None else cupy.ascontiguousarray(t)


def batch_norm(b, x, weight, bias, eps):
    if not _covered(x):
        return nfb.batch_norm(b, x, weight, bias, eps)
    x, weight, bias = cupy.ascontiguousarray(x), _dense(weight), _dense(bias)
    n, c, s, per, k = _geometry(x)
    name, cast = _index(2 * x.size)  # (a walk's last step may pass the end)
    chunk_mean = cupy.empty((c * k,), dtype=x.dtype)
    chunk_m2 = cupy.empty((c * k,), dtype=x.dtype)
    _blocks(_kernel("ndl_bn_chunk_stats", x.dtype, name), c * k,
            (x, chunk_mean, chunk_m2, cast(n), cast(c), cast(s), cast(per), cast(k)))
    mean, invstd, var = (cupy.empty((c,), dtype=x.dtype) for _ in range(3))
    launch(_kernel("ndl_bn_stats", x.dtype, name), c,
           (chunk_mean, chunk_m2, mean, invstd, var, cast(n * s), cast(c), cast(per), cast(k),
            x.dtype.type(eps)))
    y = cupy.empty(x.shape, dtype=x.dtype)
    _planes(_kernel("ndl_bn_normalize", x.dtype, name), n * c, s,
            (x, mean, invstd, weight, bias, y, cast(n * c), cast(c), cast(s)))
    return y, mean, invstd, var


def batch_norm_grad(b, grad, x, weight, mean, invstd, bias):
    if not _covered(x, grad):
        return nfb.batch_norm_grad(b, grad, x, weight, mean, invstd, bias)
    grad, x, weight = cupy.ascontiguousarray(grad), cupy.ascontiguousarray(x), _dense(weight)
    mean = cupy.ascontiguousarray(mean, dtype=x.dtype)
    invstd = cupy.ascontiguousarray(invstd, dtype=x.dtype)
    n, c, s, per, k = _geometry(x)
    name, cast = _index(2 * x.size)  # (a walk's last step may pass the end)
    chunk_dy = cupy.empty((c * k,), dtype=x.dtype)
    chunk_dy_xhat = cupy.empty((c * k,), dtype=x.dtype)
    _blocks(_kernel("ndl_bn_chunk_grad", x.dtype, name), c * k,
            (grad, x, mean, invstd, chunk_dy, chunk_dy_xhat, cast(n), cast(c), cast(s),
             cast(per), cast(k)))
    sum_dy, sum_dy_xhat = cupy.empty((c,), dtype=x.dtype), cupy.empty((c,), dtype=x.dtype)
    launch(_kernel("ndl_bn_grad_sums", x.dtype, name), c,
           (chunk_dy, chunk_dy_xhat, sum_dy, sum_dy_xhat, cast(c), cast(k)))
    grad_x = cupy.empty(x.shape, dtype=x.dtype)
    _planes(_kernel("ndl_bn_grad_input", x.dtype, name), n * c, s,
            (grad, x, mean, invstd, weight, sum_dy, sum_dy_xhat, grad_x, cast(n * c), cast(c),
             cast(s), cast(n * s)))
    return (grad_x, None if weight is None else sum_dy_xhat,
            sum_dy if bias else None)


#: each product and sum rounded on its own: NVRTC would contract a * b + c into one fused
#: multiply-add, whose single rounding is not the fallback's bits
_ROUNDED = """
__device__ inline float ndl_bn_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double ndl_bn_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float ndl_bn_add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double ndl_bn_add(double a, double b) { return __dadd_rn(a, b); }
"""


@cache
def _update_kernel():
    return kernels.elementwise(
        "T mean, T var, T keep, T momentum, T unbias", "T running_mean, T running_var",
        "running_mean = ndl_bn_add(ndl_bn_mul(running_mean, keep), ndl_bn_mul(mean, momentum));"
        " running_var = ndl_bn_add(ndl_bn_mul(running_var, keep),"
        " ndl_bn_mul(ndl_bn_mul(var, unbias), momentum))",
        "ndlite_bn_update", preamble=_ROUNDED)


def batch_norm_update(b, running_mean, running_var, mean, var, momentum, count):
    arrays = (running_mean, running_var, mean, var)
    dtype = running_mean.dtype
    if dtype not in FLOATS or any(a.dtype != dtype or not a.flags.c_contiguous
                                  or a.shape != running_mean.shape for a in arrays):
        return nfb.batch_norm_update(b, running_mean, running_var, mean, var, momentum, count)
    t = dtype.type
    _update_kernel()(mean, var, t(1 - momentum), t(momentum), t(count / (count - 1)),
                     running_mean, running_var)
