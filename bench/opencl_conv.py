"""The seed CNN's convolutions at batch 128 (forward, grad_input, grad_weight of each layer), or
ResNet-18-CIFAR's distinct ones (--model resnet18):
ndlite's OpenCL kernels against cuDNN through PyTorch (TF32 off) on the same GPU, and a sweep of
the implicit GEMM's tile sizes (TM, TN, TK) per call, to check the choice conv.tile() makes.

OpenCL times are the sum of the call's kernel times from profiling events (the product and, with
split-K, the fixed-order sum of its partials); cuDNN's from CUDA events. Medians after warm-up.

    NDLITE_OPENCL_PROFILE=1 python bench/opencl_conv.py --json out.json
    python bench/opencl_conv.py --model resnet18 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import opencl_kernel_seconds as kernel_seconds  # noqa: E402
from common import with_machine  # noqa: E402

os.environ.setdefault("NDLITE_OPENCL_PROFILE", "1")

#: (name, image (C, H, W), weight shape, stride, padding) per model
MODELS = {
    "seed_cnn": [("conv1", (1, 28, 28), (32, 1, 5, 5), 1, 0),
                 ("conv2", (32, 12, 12), (64, 32, 5, 5), 1, 0),
                 ("conv3", (64, 4, 4), (128, 64, 3, 3), 1, 0)],
    # bench/models_torch.resnet18_cifar: the stem, each stage's 3x3 convs (the first of a
    # stage at stride 2) and its 1x1 stride-2 shortcut
    "resnet18": [("stem", (3, 32, 32), (64, 3, 3, 3), 1, 1),
                 ("l1", (64, 32, 32), (64, 64, 3, 3), 1, 1),
                 ("l2 down", (64, 32, 32), (128, 64, 3, 3), 2, 1),
                 ("l2", (128, 16, 16), (128, 128, 3, 3), 1, 1),
                 ("l2 short", (64, 32, 32), (128, 64, 1, 1), 2, 0),
                 ("l3 down", (128, 16, 16), (256, 128, 3, 3), 2, 1),
                 ("l3", (256, 8, 8), (256, 256, 3, 3), 1, 1),
                 ("l3 short", (128, 16, 16), (256, 128, 1, 1), 2, 0),
                 ("l4 down", (256, 8, 8), (512, 256, 3, 3), 2, 1),
                 ("l4", (512, 4, 4), (512, 512, 3, 3), 1, 1),
                 ("l4 short", (256, 8, 8), (512, 256, 1, 1), 2, 0)],
}
LAYERS = MODELS["seed_cnn"]


def geometry(stride: int, padding: int) -> tuple:
    """(stride, padding, dilation, groups) as the backend's conv2d takes them."""
    return (stride, stride), (padding, padding), (1, 1), 1
#: (TM, TN, TK, WPT): work-items hold WPT x WPT outputs each
CANDIDATES = [(32, 64, 16, 4), (64, 64, 16, 4), (64, 64, 8, 4), (32, 32, 16, 4),
              (64, 128, 16, 4), (128, 64, 16, 4), (32, 128, 16, 4), (128, 128, 16, 4),
              (64, 64, 16, 8), (64, 128, 16, 8), (128, 64, 16, 8), (128, 128, 16, 8),
              (128, 128, 8, 8)]


def fits(b, tm, tn, tk, wpt) -> bool:
    nt = tm * tn // (wpt * wpt)
    return (nt <= b.max_group and nt % tn == 0 and nt % tk == 0 and (tm * tk) % nt == 0
            and (tk * tn) % nt == 0)


def calls(b, rng, batch: int):
    """(name, flops, function) for every convolution call of a training step."""
    out = []
    for name, image, ws, stride, padding in LAYERS:
        xs = (batch, *image)
        geo = geometry(stride, padding)
        x = b.from_numpy(rng.standard_normal(xs).astype(np.float32))
        w = b.from_numpy(rng.standard_normal(ws).astype(np.float32))
        y = b.conv2d(x, w, *geo)
        g = b.from_numpy(rng.standard_normal(y.shape).astype(np.float32))
        flops = 2 * np.prod(y.shape) * np.prod(ws[1:])
        out.append((f"{name} forward", flops, lambda x=x, w=w, geo=geo: b.conv2d(x, w, *geo)))
        if image[0] > 3 and name != "conv1":  # the image needs no gradient
            out.append((f"{name} grad_input", flops, lambda g=g, w=w, xs=xs, geo=geo:
                        b.conv2d_grad_input(g, w, xs, *geo)))
        out.append((f"{name} grad_weight", flops, lambda x=x, g=g, ws=ws, geo=geo:
                    b.conv2d_grad_weight(x, g, ws, *geo)))
    return out


def cudnn_seconds(repeats: int, batch: int) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cudnn.allow_tf32 = False
    conv_backward = torch.ops.aten.convolution_backward
    rng = np.random.default_rng(0)
    result = {}
    for name, image, ws, stride, padding in LAYERS:
        xs = (batch, *image)
        x = torch.from_numpy(rng.standard_normal(xs).astype(np.float32)).cuda()
        w = torch.from_numpy(rng.standard_normal(ws).astype(np.float32)).cuda()
        y = torch.nn.functional.conv2d(x, w, stride=stride, padding=padding)
        g = torch.randn_like(y)
        args = (g, x, w, None, [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], 1)
        fns = {"forward": lambda x=x, w=w, s=stride, p=padding: torch.nn.functional.conv2d(
                   x, w, stride=s, padding=p),
               "grad_input": lambda args=args: conv_backward(*args, [True, False, False]),
               "grad_weight": lambda args=args: conv_backward(*args, [False, True, False])}
        for part, fn in fns.items():
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            for _ in range(3):
                fn()
            times = []
            for _ in range(repeats):
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop) * 1e-3)
            result[f"{name} {part}"] = statistics.median(times)
    result["torch"] = torch.__version__
    result["cudnn"] = torch.backends.cudnn.version()
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="opencl:gpu")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--json", default="")
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--model", choices=sorted(MODELS), default="seed_cnn")
    args = p.parse_args(argv)
    global LAYERS
    LAYERS = MODELS[args.model]

    import ndlite

    b = ndlite.get_backend(args.backend)
    from ndlite_opencl import conv

    chosen_tile = conv.tile
    rows = []
    for name, flops, fn in calls(b, np.random.default_rng(0), args.batch):
        row = {"call": name, "gflop": flops / 1e9,
               "chosen_s": kernel_seconds(b, fn, args.repeats), "sweep": {}, "errors": {}}
        chosen = b.to_numpy(fn())
        if not args.no_sweep:
            for tm, tn, tk, wpt in CANDIDATES:
                if not fits(b, tm, tn, tk, wpt):
                    continue
                conv.tile = lambda *_, t=(tm, tn, tk, wpt): t
                b.__dict__.pop("_conv_plans", None)  # plans made with the chosen tiles
                try:
                    key = f"{tm}x{tn}x{tk}/{wpt}"
                    got = b.to_numpy(fn())  # a tiling that computes something else is no tiling
                    row["errors"][key] = float(np.abs(got - chosen).max() / np.abs(chosen).max())
                    if row["errors"][key] < 1e-5:
                        row["sweep"][key] = kernel_seconds(b, fn, args.repeats)
                finally:
                    conv.tile = chosen_tile
                    b.__dict__.pop("_conv_plans", None)
        rows.append(row)
    cudnn = cudnn_seconds(args.repeats, args.batch)
    print(f"conv2d calls of {args.model} at batch {args.batch} on {b.device_name()} ({b.name}), "
          f"kernel ms:")
    print(f"  {'call':20s} {'ndlite':>8s} {'TFLOP/s':>8s} {'cuDNN':>8s} {'ratio':>6s}  best tile")
    total = total_cudnn = 0.0
    for row in rows:
        ref = cudnn.get(row["call"])
        best = min(row["sweep"].items(), key=lambda kv: kv[1]) if row["sweep"] else ("-", 0)
        total += row["chosen_s"]
        total_cudnn += ref or 0
        print(f"  {row['call']:20s} {row['chosen_s'] * 1e3:8.3f} "
              f"{row['gflop'] / row['chosen_s'] / 1e3:8.2f} "
              f"{(ref or 0) * 1e3:8.3f} {row['chosen_s'] / ref if ref else 0:6.2f}  "
              f"{best[0]} {best[1] * 1e3:.3f}")
    print(f"  {'all':20s} {total * 1e3:8.3f} {'':8s} {total_cudnn * 1e3:8.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(with_machine({"device": b.device_name(), "backend": b.name,
                                    "model": args.model,
                                    "batch": args.batch, "calls": rows, "cudnn_s": cudnn,
                                    "opencl": b.info()}), f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
