"""The fast float32 matmul kernels and their launches: gemm.cl (register-blocked, with tile
sizes tuned per device: tuning.py) and gemm_cpu.cl (CPU devices: both operands packed into
panels, then a 6 x 16 register block per work-item). linalg.py decides which kernel takes a
product; `plan` is its description of the product (linalg._plan).
"""

from __future__ import annotations

from math import prod

import numpy as np

from .array import CLArray


def layout(b, plan, x: CLArray, y: CLArray, idx_np) -> np.ndarray:
    """The layout struct of a product `plan` (linalg._plan), shared by matmul.cl and gemm.cl."""
    M, N, K, bshape, sa, sb, sc, sam, sak, sbk, sbn = plan
    return b.layout((M, N, K, x.offset, y.offset, sam, sak, sbk, sbn, *bshape, *sa, *sb, *sc),
                    idx_np)


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


def run(b, out: CLArray, x: CLArray, y: CLArray, plan, params: dict, queue=None):
    """The register-blocked kernel with tile sizes `params` (TSM, TSN, TSK, WPTM, WPTN);
    returns its event (tuning and benchmarks time it on a profiling queue)."""
    kernel, grid, local, struct = launch(b, out, x, y, plan, params)
    return b.enqueue(kernel, grid, local, (out.data, x.data, y.data, struct), queue)


def launch(b, out: CLArray, x: CLArray, y: CLArray, plan, params: dict) -> tuple:
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
    return kernel, grid, (rtn, rtm, 1), layout(b, plan, x, y, idx_np)
