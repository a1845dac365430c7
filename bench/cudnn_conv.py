"""The CuPy backend's convolutions through cuDNN (backends/ndlite_cupy/cudnn.py) against
ndlite's own im2col + cuBLAS kernels and PyTorch (cuDNN, TF32 off), and the host time of one
call. One JSON document on stdout (GPU machine: cupy, the cuDNN frontend, torch optional).

    PYTHONPATH=.:backends python bench/cudnn_conv.py > bench/results/cudnn_conv_h100.json

(a) forward + weight gradient (+ input gradient but for the first layer) per layer of the seed
CNN at batch 128 and of the shapes the probe used, float32, and float16 where cuDNN runs it
natively: CUDA events over 20 back-to-back passes, median of 15 repeats.
(b) host microseconds per call of conv2d on a tiny input (launch-bound: the host's pace),
cuDNN against ndlite's kernels, and per execute of one planned graph in the frontend's ordered
form (a tuple of pointers and uids) against its mapping form (the probe's ~55 us).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cuda_time_ms  # noqa: E402

import ndlite  # noqa: E402

#: (x shape, weight shape, padding, stride, input gradient?)
LAYERS = [((128, 1, 28, 28), (32, 1, 5, 5), 0, 1, False),
          ((128, 32, 12, 12), (64, 32, 5, 5), 0, 1, True),
          ((128, 64, 4, 4), (128, 64, 3, 3), 0, 1, True),
          ((128, 64, 32, 32), (64, 64, 3, 3), 1, 1, True),
          ((128, 128, 16, 16), (256, 128, 3, 3), 1, 2, True),
          ((128, 256, 8, 8), (256, 256, 3, 3), 1, 1, True)]


def one_pass(b, x, w, g, layer):
    x_shape, w_shape, p, s, input_grad = layer
    geometry = ((s, s), (p, p), (1, 1), 1)

    def run():
        b.conv2d(x, w, *geometry)
        if input_grad:
            b.conv2d_grad_input(g, w, x_shape, *geometry)
        b.conv2d_grad_weight(x, g, w_shape, *geometry)

    return run


def torch_pass(torch, x, w, g, layer):
    _, _, p, s, input_grad = layer
    tx = torch.as_tensor(x, device="cuda").requires_grad_(input_grad)
    tw = torch.as_tensor(w, device="cuda").requires_grad_(True)
    tg = torch.as_tensor(g, device="cuda")

    def run():
        y = torch.nn.functional.conv2d(tx, tw, padding=p, stride=s)
        torch.autograd.grad(y, [tx, tw] if input_grad else [tw], tg)

    return run


def layer_times(b, conv, torch, layer, dtype) -> dict:
    import cupy

    r = np.random.default_rng(0)
    x_shape, w_shape, p, s, _ = layer
    x = cupy.asarray(r.standard_normal(x_shape).astype(dtype))
    w = cupy.asarray(r.standard_normal(w_shape).astype(dtype))
    y_shape = b.conv2d(x, w, (s, s), (p, p), (1, 1), 1).shape
    g = cupy.asarray(r.standard_normal(y_shape).astype(dtype))
    ms = {"cudnn": statistics.median(cuda_time_ms(one_pass(b, x, w, g, layer)))}
    b._cudnn = None
    try:
        ms["ndlite_kernels"] = statistics.median(cuda_time_ms(one_pass(b, x, w, g, layer)))
    finally:
        b._cudnn = conv
    if torch is not None:
        ms["torch"] = statistics.median(cuda_time_ms(torch_pass(torch, x, w, g, layer)))
    return {"x": list(x_shape), "w": list(w_shape), "padding": p, "stride": s,
            "dtype": np.dtype(dtype).name, "median_ms": ms}


def host_us(fn, calls=2000) -> float:
    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    cupy.cuda.Device().synchronize()
    return elapsed / calls * 1e6


def host_times(b, conv) -> dict:
    import cupy

    x = cupy.ones((2, 4, 8, 8), dtype=np.float32)
    w = cupy.ones((8, 4, 3, 3), dtype=np.float32)
    geometry = ((1, 1), (1, 1), (1, 1), 1)
    out = {"conv2d_cudnn": host_us(lambda: b.conv2d(x, w, *geometry))}
    b._cudnn = None
    try:
        out["conv2d_ndlite_kernels"] = host_us(lambda: b.conv2d(x, w, *geometry))
    finally:
        b._cudnn = conv
    plan = next((p for k, p in conv.plans.items() if k[0] == "fprop" and k[2] == x.shape),
                None)
    if plan is None:
        return {**out, "execute": "cuDNN declined the tiny shape"}
    y = cupy.empty((2, 8, 8, 8), dtype=np.float32)
    workspace = cupy.empty(max(1, plan.workspace), dtype=np.uint8)
    ws = workspace.data.ptr if plan.workspace else 0
    pointers, handle = (x.data.ptr, w.data.ptr, y.data.ptr), conv.handle
    out["execute_ordered"] = host_us(lambda: plan.graph.execute(
        pointers, ws, handle=handle, tensor_uids=plan.uids)) if plan.ordered else None
    out["execute_mapping"] = host_us(lambda: plan.graph.execute(
        dict(zip(plan.uids, pointers)), ws, handle=handle))
    out["workspace_bytes"] = plan.workspace
    return out


def main():
    b = ndlite.get_backend("cupy")
    conv = b._cudnn
    if conv is None:
        sys.exit(f"cuDNN is {b.info()['cudnn']}")
    try:
        import torch

        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    except ImportError:
        torch = None
    rows = [layer_times(b, conv, torch, layer, dtype)
            for dtype in (np.float32, np.float16) for layer in LAYERS]
    report = {"info": {k: v for k, v in b.info().items() if k != "devices"},
              "layers": rows, "host_us": host_times(b, conv),
              "declined": list(conv.declined.values()), "unordered": conv.unordered}
    json.dump(report, sys.stdout, indent=1, default=str)


if __name__ == "__main__":
    main()
