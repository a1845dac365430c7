"""Batched matmul: the fast float32 kernels (gemm.py: gemm.cl with tile sizes tuned per device
on GPUs, gemm_cpu.cl on CPUs) for large products, the general tiled kernel (matmul.cl) for
everything else.

Split K: a 2-D product on gemm.cl with too few tiles of C to fill the device and a long K (a
weight's gradient, g.T @ x over all the tokens: 1152 x 384 from K = 16384 in the GPT) runs as a
batch of `splits` products over equal slices of K into partial sums, which the sum over their
axis adds in a fixed order: each tile's work is cut, not made redundant, and the result is the
same bits run to run.

matmul.cl and gemm.cl read A and B in place through their strides (a transposed weight or a
broadcast batch is never copied; gemm_cpu.cl packs them into panels first) and write a new
row-major C. Batch dims broadcast and are collapsed first.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import DTypeError, ShapeError

from . import gemm, tuning
from .array import INT32_LIMIT, CLArray, broadcast_view, collapse
from .kernels import ctype

_FLOAT32 = np.dtype("float32")
#: below this many multiply-adds the general kernel is as fast and builds faster
FAST_MIN_WORK = 2**24
#: on a GPU a batch of products takes gemm.cl from this many multiply-adds each, when the
#: batch adds up to FAST_MIN_WORK (attention's 256 x 256 x 64 products, 384 of them a GPT step)
BATCHED_MIN_WORK = 2**18
#: split K until gemm.cl's work-groups number this many per compute unit, keeping each slice
#: of K at least SPLIT_MIN_K long
SPLIT_GROUPS, SPLIT_MIN_K = 4, 512


def matmul(b, x: CLArray, y: CLArray) -> CLArray:
    plans = b.__dict__.setdefault("_matmul_plans", {})
    key = (x.shape, x.strides, x.offset, x.wide, y.shape, y.strides, y.offset, y.wide, x.dtype,
           y.dtype)
    plan = plans.get(key)
    if plan is None:
        plan = _plan(b, x, y)
        if len(plans) > 4096:
            plans.clear()
        plans[key] = plan
    out_shape, launch = plan
    if launch is not None and isinstance(launch[0], str):  # "split": slices of K, then added
        _, partial_shape, (kernel, grid, local, layout) = launch
        partial = b._new(partial_shape, x.dtype, "matmul")
        b.enqueue(kernel, grid, local, (partial.data, x.data, y.data, layout))
        # (M, N) summed; the planned shape may have batch dims of size 1 (collapse drops them)
        return b.reshape(b.sum(partial, (0,), False), out_shape)
    out = b._new(out_shape, x.dtype, "matmul")
    if launch is None:  # nothing to compute, or K == 0: zeros
        if out.size:
            b._fill(out, 0)
        return out
    if len(launch) == 2:  # CPUs: pack both operands, then multiply the packed panels
        (pack, *packs), (kernel, grid, layout) = launch
        panels = []
        for source, (items, pack_layout) in zip((x, y), packs, strict=True):
            panels.append(b._new((items,), x.dtype, "matmul"))
            b._launch(pack, items, (panels[-1].data, source.data, pack_layout))
        b.enqueue(kernel, grid, (1, 1, 1), (out.data, panels[0].data, panels[1].data, layout))
        return out
    kernel, grid, local, layout = launch
    b.enqueue(kernel, grid, local, (out.data, x.data, y.data, layout))
    return out


def _plan(b, x: CLArray, y: CLArray) -> tuple:
    """(output shape, (kernel, grid, local, layout) or None): kept per operand layouts, so a
    repeated product costs a dict lookup, an allocation and the enqueue."""
    if x.ndim < 2 or y.ndim < 2:
        raise ShapeError(f"matmul: operands need at least 2 dims, got shapes {x.shape} and "
                         f"{y.shape}")
    (M, K), (K2, N) = x.shape[-2:], y.shape[-2:]
    if K != K2:
        raise ShapeError(f"matmul: shapes {x.shape} and {y.shape} are not aligned: {K} != {K2}")
    if x.dtype != y.dtype or x.dtype.kind == "b":
        raise DTypeError(f"matmul: dtypes {x.dtype} and {y.dtype} (shapes {x.shape} and "
                         f"{y.shape}): need one numeric dtype")
    batch = _batch_shape(x.shape[:-2], y.shape[:-2], x.shape, y.shape)
    out = CLArray(None, batch + (M, N), x.dtype)  # the layout the output will have
    if out.size == 0 or K == 0:
        return out.shape, None
    xb = broadcast_view(x, batch + (M, K))
    yb = broadcast_view(y, batch + (K, N))
    bshape, sa, sb, sc = collapse(batch, xb.strides[:-2], yb.strides[:-2], out.strides[:-2])
    # a dim of size 1 is contiguous whatever its stride says (kernels only read index 0)
    sam, sak = (1 if M == 1 else xb.strides[-2]), (1 if K == 1 else xb.strides[-1])
    sbk, sbn = (1 if K == 1 else yb.strides[-2]), (1 if N == 1 else yb.strides[-1])
    plan = (M, N, K, bshape, sa, sb, sc, sam, sak, sbk, sbn)
    # the output's size decides the index width as the allocation will
    out.wide = out.size > INT32_LIMIT
    work = M * N * K
    batched = b.is_gpu and bshape and work >= BATCHED_MIN_WORK
    large = x.dtype == _FLOAT32 and (
        work >= FAST_MIN_WORK or (batched and work * prod(bshape) >= FAST_MIN_WORK))
    if large and not b.is_gpu and not bshape and not (out.wide or xb.wide or yb.wide):
        return out.shape, gemm.cpu_launch(b, xb, yb, plan)
    params = None
    if large and 1 in (sam, sak) and 1 in (sbk, sbn):
        params = tuning.gemm_params(b)
    if params is not None:
        splits = _splits(b, M, N, K, bshape, params)
        if splits > 1:
            return out.shape, _split_launch(b, xb, yb, plan, params, splits)
        if bshape and M * N <= tuning.SMALL:  # a batch of small products: their own tiles
            params = tuning.gemm_params(b, "small") or params
        return out.shape, gemm.launch(b, out, xb, yb, plan, params)
    return out.shape, _general(b, out, xb, yb, plan)


def _splits(b, M: int, N: int, K: int, bshape: tuple, params: dict) -> int:
    """How many slices of K a 2-D product on gemm.cl runs as (1: not split): doubled while its
    work-groups number fewer than SPLIT_GROUPS per compute unit and K cuts into equal slices of
    whole k-steps, each at least SPLIT_MIN_K long."""
    if bshape:
        return 1
    groups = -(-M // params["TSM"]) * -(-N // params["TSN"])
    splits = 1
    while (groups * splits < SPLIT_GROUPS * b.compute_units
           and K % (2 * splits * params["TSK"]) == 0 and K // (2 * splits) >= SPLIT_MIN_K):
        splits *= 2
    return splits


def _split_launch(b, x: CLArray, y: CLArray, plan, params: dict, splits: int) -> tuple:
    """("split", the partial sums' shape, gemm.cl's launch): the product as a batch of `splits`
    products over slices of K, the batch dim stepping A along k, B along k and C by M x N."""
    M, N, K, _, _, _, _, sam, sak, sbk, sbn = plan
    piece = K // splits
    partial = CLArray(None, (splits, M, N), x.dtype)
    partial.wide = partial.size > INT32_LIMIT
    split_plan = (M, N, piece, (splits,), (piece * sak,), (piece * sbk,), (M * N,), sam, sak,
                  sbk, sbn)
    return "split", partial.shape, gemm.launch(b, partial, x, y, split_plan, params)


def _batch_shape(a: tuple, c: tuple, x_shape: tuple, y_shape: tuple) -> tuple:
    n = max(len(a), len(c))
    pa, pc = (1,) * (n - len(a)) + a, (1,) * (n - len(c)) + c
    out = []
    for p, q in zip(pa, pc, strict=True):
        if p != q and p != 1 and q != 1:
            raise ShapeError(f"matmul: batch dims of shapes {x_shape} and {y_shape} cannot be "
                             f"broadcast together")
        out.append(q if p == 1 else p)
    return tuple(out)


def _general(b, out: CLArray, x: CLArray, y: CLArray, plan) -> tuple:
    M, N, K, bshape = plan[:4]
    tile = 16 if b.max_group >= 256 else 8
    idx, idx_np = b._index_type(out.size, out, x, y)
    defines = (("IDX", idx), ("LAYOUT_LEN", 9 + 4 * len(bshape)), ("T", ctype(x.dtype)),
               ("TS", tile), ("NB", len(bshape)))
    kernel = b.kernels.get("matmul.cl", "matmul", defines)
    grid = (-(-N // tile) * tile, -(-M // tile) * tile, prod(bshape))
    return kernel, grid, (tile, tile, 1), gemm.layout(b, plan, x, y, idx_np)
