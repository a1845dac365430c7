"""OpenCL embedding_grad's two paths on the device at hand: the walk a GPU takes (a
work-group per (row, block of columns) over every position; forced here with is_gpu) against
the host-sorted segment sum, for the character GPT's two embeddings (65 and 256 rows, 64 x 256
positions, width 384). Wall time after synchronize, mean of 3 after one warm-up. On a CPU
device (PoCL) it shows why the walk is GPU only (transformer.SCAN_MAX).

    python bench/opencl_embedding.py [--backend opencl]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402,F401  (puts ndlite on sys.path)

import ndlite  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="opencl")
    args = p.parse_args(argv)
    b = ndlite.get_backend(args.backend)
    gpu = b.is_gpu
    r = np.random.default_rng(0)
    print(f"embedding_grad on {b.device_name()} ({b.name}), ms:")
    for rows, n, d in [(65, 16384, 384), (256, 16384, 384)]:
        g = b.from_numpy(r.standard_normal((n, d)).astype(np.float32))
        i = b.from_numpy(r.integers(0, rows, n).astype(np.int64))
        ms = {}
        try:
            for walk in (True, False):
                b.is_gpu = walk  # which path embedding_grad takes
                b.embedding_grad(g, i, rows)
                b.synchronize()
                start = time.perf_counter()
                for _ in range(3):
                    b.embedding_grad(g, i, rows)
                b.synchronize()
                ms[walk] = (time.perf_counter() - start) / 3 * 1e3
        finally:
            b.is_gpu = gpu
        print(f"  {rows} rows x {n} positions x {d}: walk {ms[True]:.1f}, sorted segments "
              f"{ms[False]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
