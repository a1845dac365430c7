"""The batch-norm fast paths of the OpenCL backend (protocol.py; the specification is
ndlite/device/norm_fallbacks.py), on the kernels in kernels/norm.cl.

x (N, C, *) is seen as (N, C, S). Each channel's N * S values are cut into K chunks of at
least CHUNK_MIN (at most CHUNKS chunks): K depends on the shape alone, so the sums' order and
the bits are the same run to run, and a few channels of many values still fill a GPU.
- batch_norm: per (channel, chunk) a work-group's mean and sum of squares about it; per
  channel the chunks combined in order (mean, var, invstd); one pass for y over the planes
  (n, c), a work-group fitted to the plane size;
- batch_norm_grad: per (channel, chunk) the sums of grad and grad * xhat; per channel the
  chunks in order (grad_bias, grad_weight); one pass for grad_x likewise.
No kernel divides per element.
Four launches forward, three backward, two passes over x each way (three forward: the chunk
is read twice, mostly from cache); batch_norm_update is one launch, an item per channel,
without fused multiply-adds (the fallback's bits). Halves come here as float32 (halves.py wraps the
contractions), or compute in float with their statistics float32 where called natively.
Empty tensors and sizes past 32-bit indexing take the fallbacks. Every function takes the
backend `b` first.
"""

from __future__ import annotations

import math

import numpy as np

from ndlite.device import norm_fallbacks as nfb

from . import halves
from .array import INT32_LIMIT
from .kernels import actype, arith, slot

#: the fewest values of a channel one work-group sums, and the most chunks per channel
CHUNK_MIN, CHUNKS = 4096, 256


def _ok(x) -> bool:
    return x.size > 0 and 4 * x.size < INT32_LIMIT


def _dense(b, x):
    if x is None:
        return None
    return x if x.contiguous and x.offset == 0 else b.copy(x)


def _group(b, per: int) -> int:
    """A power of two near a quarter of a chunk on a GPU (at most b.group), 1 on a CPU."""
    if not b.is_gpu:
        return 1
    t = 1
    while 2 * t <= b.group and (t < 32 or 4 * t < per):
        t *= 2
    return t


def _plane_group(b, s: int) -> tuple[int, int]:
    """The work-group (tx, ty) of the plane kernels: tx the power of two that covers a plane
    of s values (at most b.group), ty planes side by side; (1, 1) on a CPU."""
    if not b.is_gpu:
        return 1, 1
    tx = min(b.group, 1 << max(s - 1, 0).bit_length())
    return tx, b.group // tx


def _planes(b, kernel, planes: int, s: int, args: tuple) -> None:
    tx, ty = _plane_group(b, s)
    b.enqueue(kernel, (tx, -(-planes // ty) * ty), (tx, ty), args)


def _kernel(b, name: str, dtype, group: int = 1):
    defines = (("IDX", "int"), ("LAYOUT_LEN", 5), ("T", actype(dtype)), *slot("P", dtype),
               ("WG", group), ("GROUP_SUM", 1))  # common.cl's group_sum
    return b.kernels.get("norm.cl", name, defines)


def chunks(m: int) -> tuple[int, int]:
    """(per, K): a channel of m values in K chunks of `per` (the last shorter)."""
    per = max(CHUNK_MIN, -(-m // CHUNKS))
    return per, -(-m // per)


def _layout(b, x):
    n, c = x.shape[0], x.shape[1]
    s = math.prod(x.shape[2:])
    per, k = chunks(n * s)
    return b.layout((n, c, s, per, k), np.int32), c, per, k


def _data(x):
    return None if x is None else x.data


def batch_norm(b, x, weight, bias, eps):
    if not _ok(x):
        return halves.core(b, nfb.batch_norm, x, weight, bias, eps)
    x, weight, bias = _dense(b, x), _dense(b, weight), _dense(b, bias)
    layout, c, per, k = _layout(b, x)
    wide = arith(x.dtype)
    chunk_mean, chunk_m2 = (b._new((c * k,), wide, "batch_norm") for _ in range(2))
    group = _group(b, per)
    b.enqueue(_kernel(b, "bn_chunk_stats", x.dtype, group), (c * k * group,), (group,),
              (chunk_mean.data, chunk_m2.data, x.data, layout))
    mean, invstd, var = (b._new((c,), wide, "batch_norm") for _ in range(3))
    b._launch(_kernel(b, "bn_stats", x.dtype), c,
              (mean.data, invstd.data, var.data, chunk_mean.data, chunk_m2.data,
               wide.type(eps), layout))
    y = b._new(x.shape, x.dtype, "batch_norm")
    _planes(b, _kernel(b, "bn_normalize", x.dtype), x.shape[0] * c, x.size // (x.shape[0] * c),
            (y.data, x.data, mean.data, invstd.data, _data(weight), _data(bias), layout))
    return y, mean, invstd, var


def batch_norm_grad(b, grad, x, weight, mean, invstd, bias):
    if not _ok(x):
        return halves.core(b, nfb.batch_norm_grad, grad, x, weight, mean, invstd, bias)
    grad, x, weight = _dense(b, grad), _dense(b, x), _dense(b, weight)
    wide = arith(x.dtype)  # mean and invstd: float32 for halves (as batch_norm gives them)
    mean, invstd = (_dense(b, v if v.dtype == wide else b.astype(v, wide))
                    for v in (mean, invstd))
    layout, c, per, k = _layout(b, x)
    chunk_dy, chunk_dy_xhat = (b._new((c * k,), wide, "batch_norm_grad") for _ in range(2))
    group = _group(b, per)
    b.enqueue(_kernel(b, "bn_chunk_grad", x.dtype, group), (c * k * group,), (group,),
              (chunk_dy.data, chunk_dy_xhat.data, grad.data, x.data, mean.data, invstd.data,
               layout))
    sum_dy, sum_dy_xhat = (b._new((c,), wide, "batch_norm_grad") for _ in range(2))
    b._launch(_kernel(b, "bn_grad_sums", x.dtype), c,
              (sum_dy.data, sum_dy_xhat.data, chunk_dy.data, chunk_dy_xhat.data, layout))
    grad_x = b._new(x.shape, x.dtype, "batch_norm_grad")
    _planes(b, _kernel(b, "bn_grad_input", x.dtype), x.shape[0] * c,
            x.size // (x.shape[0] * c), (grad_x.data, grad.data, x.data, mean.data,
                                         invstd.data, _data(weight), sum_dy.data,
                                         sum_dy_xhat.data, layout))

    def own(v):  # the parameters' gradients in their dtype (a half: rounded once)
        return v if v.dtype == x.dtype else b.astype(v, x.dtype)

    return (grad_x, None if weight is None else own(sum_dy_xhat),
            own(sum_dy) if bias else None)


def batch_norm_update(b, running_mean, running_var, mean, var, momentum, count):
    arrays = (running_mean, running_var, mean, var)
    dtype = running_mean.dtype
    if dtype.kind != "f" or dtype.itemsize < 4 or any(
            a.dtype != dtype or not a.contiguous or a.offset or a.shape != running_mean.shape
            for a in arrays):
        return nfb.batch_norm_update(b, running_mean, running_var, mean, var, momentum, count)
    c = running_mean.size
    t = dtype.type
    layout = b.layout((1, c, 1, 1, 1), np.int32)
    b._launch(_kernel(b, "bn_update", dtype), c,
              (running_mean.data, running_var.data, mean.data, var.data, t(1 - momentum),
               t(momentum), t(count / (count - 1)), layout))
