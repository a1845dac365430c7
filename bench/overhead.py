"""Per-op overhead on tiny tensors, and a Linear layer's forward+backward at batch 4.

Compares, in one run and at one thread count: ndlite on the NumPy backend (grad recording off
and on), raw NumPy, and PyTorch CPU eager when it is installed.

    python bench/overhead.py [--threads N] [--out overhead]

Targets (issue "Core"): <= 2 us per op without grad recording (<= 2x PyTorch), <= 4 us with;
the bias-free Linear at batch 4 no slower than PyTorch at 5, 50 and 500 neurons.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time, pin_threads, save  # noqa: E402

OPS = ["add", "mul", "add scalar", "exp", "relu", "sum", "reshape", "slice", "matmul 8x8"]


def numpy_ops(np):
    a, b = np.ones(8, np.float32), np.full(8, 2.0, np.float32)
    m = np.ones((8, 8), np.float32)
    return {
        "add": lambda: a + b, "mul": lambda: a * b, "add scalar": lambda: a + 1.0,
        "exp": lambda: np.exp(a), "relu": lambda: np.maximum(a, 0), "sum": lambda: a.sum(),
        "reshape": lambda: a.reshape(2, 4), "slice": lambda: a[1:5], "matmul 8x8": lambda: m @ m,
    }


def tensor_ops(lib, requires_grad):
    """The same ops through ndlite or torch (their tensor APIs agree on these)."""
    a = lib.ones(8, requires_grad=requires_grad)
    b = lib.full((8,), 2.0)
    m = lib.ones(8, 8, requires_grad=requires_grad)
    return {
        "add": lambda: a + b, "mul": lambda: a * b, "add scalar": lambda: a + 1.0,
        "exp": lambda: a.exp(), "relu": lambda: a.relu(), "sum": lambda: a.sum(),
        "reshape": lambda: a.reshape(2, 4), "slice": lambda: a[1:5], "matmul 8x8": lambda: m @ m,
    }


def linear_steps(ndlite, torch, np, n):
    """forward + backward of y = x @ W.T at batch 4, n -> n neurons, on each library."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((4, n)).astype(np.float32)
    w_np = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    g_np = rng.standard_normal((4, n)).astype(np.float32)
    F = ndlite.nn.functional
    x, w, g = ndlite.tensor(x_np), ndlite.tensor(w_np, requires_grad=True), ndlite.tensor(g_np)

    def ours():
        w.grad = None
        F.linear(x, w).backward(g)

    steps = {"ndlite": ours}
    if torch is not None:
        tx, tg = torch.from_numpy(x_np), torch.from_numpy(g_np)
        tw = torch.from_numpy(w_np.copy()).requires_grad_()

        def theirs():
            tw.grad = None
            torch.nn.functional.linear(tx, tw).backward(tg)

        steps["torch"] = theirs
    ours()
    return steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="BLAS/torch threads (all)")
    parser.add_argument("--number", type=int, default=20000, help="calls per timing run")
    parser.add_argument("--out", default="overhead", help="results file name in bench/results")
    args = parser.parse_args(argv)
    threads = pin_threads(args.threads)

    import numpy as np

    import ndlite

    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    us = 1e6
    table = {}
    columns = {"numpy": numpy_ops(np), "ndlite": tensor_ops(ndlite, False),
               "ndlite+grad": tensor_ops(ndlite, True)}
    if torch is not None:
        columns["torch"] = tensor_ops(torch, False)
        columns["torch+grad"] = tensor_ops(torch, True)
    for op in OPS:
        table[op] = {name: median_time(fns[op], args.number) * us for name, fns in columns.items()}
    print(f"per-op time on 8-element float32 tensors, microseconds (median), {threads} threads")
    print(f"{'op':12s}" + "".join(f"{c:>13s}" for c in columns) +
          ("   ndlite/torch" if torch else ""))
    for op, row in table.items():
        ratio = f"{row['ndlite'] / row['torch']:15.2f}" if torch else ""
        print(f"{op:12s}" + "".join(f"{row[c]:13.2f}" for c in columns) + ratio)

    linear = {}
    print("\nLinear forward+backward at batch 4 (bias-free, grad of W), microseconds (median)")
    for n in (5, 50, 500):
        steps = linear_steps(ndlite, torch, np, n)
        number = max(200, args.number // (20 if n < 500 else 100))
        linear[n] = {name: median_time(fn, number) * us for name, fn in steps.items()}
        ratio = f"  ndlite/torch {linear[n]['ndlite'] / linear[n]['torch']:.2f}" if torch else ""
        print(f"{n:4d} neurons: " + "  ".join(f"{k} {v:8.1f}" for k, v in linear[n].items())
              + ratio)
    path = save(args.out, {"threads": threads, "unit": "microseconds",
                           "per_op_8_float32": table,
                           "linear_batch4_fwd_bwd": {str(k): v for k, v in linear.items()}})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
