"""A square float32 product through NumPy's BLAS (the kernels OpenBLAS chose, as threadpoolctl
reports them) and through PyTorch CPU when it is installed, at the same thread count: the
median of 20 products after warm-up. Run it with and without OPENBLAS_CORETYPE set to see what
the variable costs (docs/DESIGN.md, "CPU performance of the NumPy backend").

    python bench/blas_gemm.py [--n 1024] [--threads 2] [--out blas_gemm_2core]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time, pin_threads, save  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="a result name in bench/results")
    args = parser.parse_args()
    threads = pin_threads(args.threads)
    import numpy as np
    from threadpoolctl import threadpool_info

    n = args.n
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    flops = 2 * n ** 3
    rows = {"numpy": median_time(lambda: a @ b, 20)}
    kernels = [(i.get("internal_api"), i.get("architecture")) for i in threadpool_info()
               if i.get("user_api") == "blas"]
    try:
        import torch

        torch.set_num_threads(threads)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        rows["torch"] = median_time(lambda: ta @ tb, 20)
    except ImportError:
        pass
    coretype = os.environ.get("OPENBLAS_CORETYPE", "(unset)")
    print(f"{n}^3 float32 at {threads} thread(s), BLAS kernels {kernels}, "
          f"OPENBLAS_CORETYPE={coretype}")
    for name, seconds in rows.items():
        print(f"  {name:6s} {seconds * 1e3:7.2f} ms  {flops / seconds / 1e9:6.0f} GFLOP/s")
    if args.out:
        print("wrote", save(args.out, {"n": n, "threads": threads, "blas_kernels": kernels,
                                       "openblas_coretype": coretype,
                                       "ms": {k: v * 1e3 for k, v in rows.items()}}))


if __name__ == "__main__":
    main()
