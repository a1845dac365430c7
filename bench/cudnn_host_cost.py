"""Host microseconds of one backend call on the cupy backend (the least of 5 x 300
back-to-back calls): conv2d through the cuDNN frontend's C++ execute (cudnn.native_execute)
and through its public execute, then batch_norm, batch_norm_grad and a few elementwise calls
(docs/cuda.md, "Host cost"). Large calls are paced by the GPU, not the host: read them so.

    python bench/cudnn_host_cost.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402,F401  (puts ndlite on sys.path)

import ndlite  # noqa: E402


def cost(b, f, n=300) -> float:
    for _ in range(20):
        f()
    b.synchronize()
    reps = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            f()
        reps.append((time.perf_counter() - start) / n * 1e6)
        b.synchronize()
    return round(min(reps), 1)


def main() -> None:
    import cupy

    b = ndlite.get_backend("cupy")
    x = cupy.random.standard_normal((128, 64, 16, 16), dtype=cupy.float32)
    w = cupy.random.standard_normal((64, 64, 3, 3), dtype=cupy.float32)
    g = cupy.random.standard_normal((128, 64, 16, 16), dtype=cupy.float32)

    def conv():
        return b.conv2d(x, w, (1, 1), (1, 1), (1, 1), 1)

    conv()
    plans = list(b._cudnn.plans.values())
    print("C++ execute found:", [bool(p.native) for p in plans])
    print("conv2d host us, C++ execute:", cost(b, conv))
    for plan in plans:
        plan.native = False
    print("conv2d host us, public ordered execute:", cost(b, conv))
    for plan in plans:
        plan.native = None
    ones, zeros = cupy.ones((64,), cupy.float32), cupy.zeros((64,), cupy.float32)
    print("batch_norm host us:", cost(b, lambda: b.batch_norm(x, ones, zeros, 1e-5)))
    _, mean, invstd, _ = b.batch_norm(x, ones, zeros, 1e-5)
    print("batch_norm_grad host us:",
          cost(b, lambda: b.batch_norm_grad(g, x, ones, mean, invstd, True)))
    print("relu", cost(b, lambda: b.relu(x)), "add", cost(b, lambda: b.add(x, g)),
          "gt", cost(b, lambda: b.gt(x, 0)), "where",
          cost(b, lambda: b.where(b.gt(x, 0), g, 0.0)))


if __name__ == "__main__":
    main()
