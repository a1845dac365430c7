"""The NumPy backend's float32 convolutions through oneDNN (backends/ndlite_numpy/onednn.py)
against its own numba im2col / Winograd kernels (nn.py) and PyTorch CPU, per layer of the VGG-style
net (batch 32) and of the seed CNN (batch 128): forward, input gradient, weight gradient.

    OMP_NUM_THREADS=2 python bench/onednn_conv.py --threads 2 [--out onednn_conv_2core]

Calls of the three alternate within each layer and pass (oneDNN, ours, torch, ...), the figure
is the best over repeats of the mean of a few calls, in milliseconds; results in
bench/results/<out>.json. Needs onednn-cpu-gomp (and torch for its column).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pin_threads, save  # noqa: E402

#: (name, x shape, weight shape, padding, input gradient needed in training)
LAYERS = [("vgg1 3->32 32x32", (32, 3, 32, 32), (32, 3, 3, 3), 1, False),
          ("vgg2 32->32 32x32", (32, 32, 32, 32), (32, 32, 3, 3), 1, True),
          ("vgg3 32->64 16x16", (32, 32, 16, 16), (64, 32, 3, 3), 1, True),
          ("vgg4 64->64 16x16", (32, 64, 16, 16), (64, 64, 3, 3), 1, True),
          ("vgg5 64->128 8x8", (32, 64, 8, 8), (128, 64, 3, 3), 1, True),
          ("vgg6 128->128 8x8", (32, 128, 8, 8), (128, 128, 3, 3), 1, True),
          ("seed1 1->32 28x28 5x5", (128, 1, 28, 28), (32, 1, 5, 5), 0, False),
          ("seed2 32->64 12x12 5x5", (128, 32, 12, 12), (64, 32, 5, 5), 0, True),
          ("seed3 64->128 4x4", (128, 64, 4, 4), (128, 64, 3, 3), 0, True)]
PASSES = ("forward", "grad_input", "grad_weight")


def calls(x, w, go, p):
    """{pass: {implementation: fn}} for one layer."""
    import numpy as np
    from ndlite_numpy import nn, onednn

    one, geo = (1, 1), ((1, 1), (p, p), (1, 1), 1)
    def ours(fn, *args):  # nn.py's numba / NumPy path, oneDNN off
        with onednn.disabled():
            return fn(*args)

    out = {"forward": {"onednn": lambda: onednn.conv2d(x, w, *geo),
                       "ndlite": lambda: ours(nn.conv2d, x, w, *geo)},
           "grad_input": {"onednn": lambda: onednn.conv2d_grad_input(go, w, x.shape, *geo),
                          "ndlite": lambda: ours(nn.conv2d_grad_input, go, w, x.shape, *geo)},
           "grad_weight": {"onednn": lambda: onednn.conv2d_grad_weight(x, go, w.shape, *geo),
                           "ndlite": lambda: ours(nn.conv2d_grad_weight, x, go, w.shape,
                                                  *geo)}}
    try:
        import torch
    except ImportError:
        return out
    tx, tw, tgo = (torch.from_numpy(a) for a in (x, w, go))

    def backward(mask):
        return torch.ops.aten.convolution_backward(tgo, tx, tw, None, one, (p, p), one, False,
                                                   (0, 0), 1, mask)

    out["forward"]["torch"] = lambda: torch.nn.functional.conv2d(tx, tw, padding=p)
    out["grad_input"]["torch"] = lambda: backward([True, False, False])
    out["grad_weight"]["torch"] = lambda: backward([False, True, False])
    for fns in out.values():  # the same answers (oneDNN against ours, to float32 rounding)
        a, b = np.asarray(fns["onednn"]()), np.asarray(fns["ndlite"]())
        scale = float(np.abs(b).max()) or 1.0
        assert float(np.abs(a - b).max()) <= 1e-4 * scale, "oneDNN differs from nn.py"
    return out


def timed(fns: dict, repeat: int, number: int) -> dict:
    runs = {k: [] for k in fns}
    for fn in fns.values():  # warm-up: primitives made, kernels compiled, scratch allocated
        fn()
    for _ in range(repeat):
        for k, fn in fns.items():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            runs[k].append((time.perf_counter() - start) / number * 1e3)
    # the best repeat: other jobs on the shared VM only add time, and OpenMP's static split
    # (oneDNN's, PyTorch's) waits for a descheduled thread, so medians swing 10x under load
    return {k: round(min(v), 3) for k, v in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--number", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    pin_threads(args.threads)
    import numpy as np
    from ndlite_numpy import onednn

    print(onednn.status())
    rng = np.random.default_rng(0)
    rows, totals = [], {}
    for name, xs, ws, p, needs_gi in LAYERS:
        x, w = (rng.standard_normal(s, dtype=np.float32) for s in (xs, ws))
        oh = xs[2] + 2 * p - ws[2] + 1
        go = rng.standard_normal((xs[0], ws[0], oh, oh), dtype=np.float32)
        for pass_, fns in calls(x, w, go, p).items():
            ms = timed(fns, args.repeat, args.number)
            rows.append({"layer": name, "pass": pass_, "ms": ms})
            print(f"{name:24s} {pass_:12s} " + "  ".join(f"{k} {v:7.3f}" for k, v in ms.items()))
            if pass_ != "grad_input" or needs_gi:  # (a first layer's input gradient: unused)
                net = totals.setdefault(name.split()[0].rstrip("0123456789"), {})
                for k, v in ms.items():
                    net[k] = round(net.get(k, 0.0) + v, 3)
    for net, ms in totals.items():
        print(f"{net} total (training passes): " + "  ".join(f"{k} {v:.2f}" for k, v in ms.items()))
    if args.out:
        print(save(args.out, {"threads": args.threads, "onednn": onednn.status(),
                              "layers": rows, "totals": totals}))


if __name__ == "__main__":
    main()
