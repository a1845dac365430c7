"""Batched matmul: the tuned register-blocked kernel (gemm.cl) for large float32 products, the
general tiled kernel (matmul.cl) for everything else.

Both read A and B in place through their strides (a transposed weight or a broadcast batch is
never copied) and write a new row-major C. Batch dims broadcast and are collapsed first.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ndlite.device import DTypeError, ShapeError

from . import tuning
from .array import INT32_LIMIT, CLArray, broadcast_view, collapse
from .kernels import ctype

_FLOAT32 = np.dtype("float32")
#: below this many multiply-adds the general kernel is as fast and builds faster
FAST_MIN_WORK = 2**24


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
    large = x.dtype == _FLOAT32 and M * N * K >= FAST_MIN_WORK
    if large and not b.is_gpu and not bshape and not (out.wide or xb.wide or yb.wide):
        return out.shape, cpu_launch(b, xb, yb, plan)
    params = None
    if large and 1 in (sam, sak) and 1 in (sbk, sbn):
        params = tuning.gemm_params(b)
    if params is not None:
        return out.shape, gemm_launch(b, out, xb, yb, plan, params)
    return out.shape, _general(b, out, xb, yb, plan)


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


def _layout(b, plan, x: CLArray, y: CLArray, idx_np) -> np.ndarray:
    M, N, K, bshape, sa, sb, sc, sam, sak, sbk, sbn = plan
    return b.layout((M, N, K, x.offset, y.offset, sam, sak, sbk, sbn, *bshape, *sa, *sb, *sc),
                    idx_np)


def _general(b, out: CLArray, x: CLArray, y: CLArray, plan) -> tuple:
    M, N, K, bshape = plan[:4]
    tile = 16 if b.max_group >= 256 else 8
    idx, idx_np = b._index_type(out.size, out, x, y)
    defines = (("IDX", idx), ("LAYOUT_LEN", 9 + 4 * len(bshape)), ("T", ctype(x.dtype)),
               ("TS", tile), ("NB", len(bshape)))
    kernel = b.kernels.get("matmul.cl", "matmul", defines)
    grid = (-(-N // tile) * tile, -(-M // tile) * tile, prod(bshape))
    return kernel, grid, (tile, tile, 1), _layout(b, plan, x, y, idx_np)


#: rows of C per work-item of gemm_cpu.cl and its vector width: 6 x (2 x 8) floats, the
#: accumulators of an AVX2 BLAS micro-kernel (4 and 6 rows ran alike on PoCL on a 2-core EPYC,
#: 8 spill registers)
CPU_ROWS, CPU_WIDTH = 6, 8


def cpu_launch(b, x: CLArray, y: CLArray, plan) -> tuple:
    """((pack kernel, (A's packed size, layout), (B's packed size, layout)),
    (gemm_cpu kernel, grid, layout)): the CPU devices' float32 product (gemm_cpu.cl)."""
    M, N, K, _, _, _, _, sam, sak, sbk, sbn = plan
    w = CPU_WIDTH
    defines = (("IDX", "int"), ("LAYOUT_LEN", 7), ("T", "float"), ("TV", f"float{w}"),
               ("VW", w), ("VSTORE", f"vstore{w}"), ("RM", CPU_ROWS))
    pack = b.kernels.get("gemm_cpu.cl", "pack", defines)
    kernel = b.kernels.get("gemm_cpu.cl", "gemm_cpu", defines)
    packs = []
    for rows, sr, sc, offset, block in ((M, sam, sak, x.offset, CPU_ROWS),
                                        (N, sbn, sbk, y.offset, 2 * w)):
        padded = -(-rows // block) * block
        packs.append((padded * K, b.layout((rows, K, sr, sc, offset, block, padded), np.int32)))
    grid = (-(-M // CPU_ROWS), -(-N // (2 * w)), 1)
    return (pack, *packs), (kernel, grid, b.layout((M, N, K, 0, 0, 0, 0), np.int32))


def gemm(b, out: CLArray, x: CLArray, y: CLArray, plan, params: dict, queue=None):
    """The register-blocked kernel with tile sizes `params` (TSM, TSN, TSK, WPTM, WPTN);
    returns its event (tuning and benchmarks time it on a profiling queue)."""
    kernel, grid, local, layout = gemm_launch(b, out, x, y, plan, params)
    return b.enqueue(kernel, grid, local, (out.data, x.data, y.data, layout), queue)


def gemm_launch(b, out: CLArray, x: CLArray, y: CLArray, plan, params: dict) -> tuple:
    """(kernel, grid, local, layout) of the register-blocked kernel for this product."""
    M, N, K, bshape, sa, sb, sc, sam, sak, sbk, sbn = plan
    tsm, tsn, tsk = params["TSM"], params["TSN"], params["TSK"]
    a_kcont, b_ncont = int(sak == 1), int(sbn == 1)
    a_lead, b_lead = (sam if a_kcont else sak), (sbk if b_ncont else sbn)
    aligned = all(v % 4 == 0 for v in (x.offset, y.offset, a_lead, b_lead, *sa, *sb))
    even = M % tsm == 0 and N % tsn == 0 and K % tsk == 0
    idx, idx_np = b._index_type(out.size, out, x, y)
    defines = (("IDX", idx), ("LAYOUT_LEN", 9 + 4 * len(bshape)), ("T", "float"),
               ("T4", "float4"), *sorted(params.items()), ("A_KCONT", a_kcont),
               ("B_NCONT", b_ncont), ("EVEN", int(even)), ("ALIGNED", int(aligned)),
               ("NB", len(bshape)))
    kernel = b.kernels.get("gemm.cl", "gemm", defines)
    rtm, rtn = tsm // params["WPTM"], tsn // params["WPTN"]
    grid = (-(-N // tsn) * rtn, -(-M // tsm) * rtm, prod(bshape))
    return kernel, grid, (rtn, rtm, 1), _layout(b, plan, x, y, idx_np)
