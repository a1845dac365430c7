"""What NVIDIA's cuDNN frontend (pip `nvidia-cudnn-frontend`) does with ndlite's layouts.

On this GPU it builds conv_fprop / conv_dgrad / conv_wgrad graphs over device buffers (their
pointers in the variant pack) in NCHW and NHWC strides, float32 / float16 / bfloat16, and
compares each result with PyTorch's float64 convolution; reports the strides cuDNN gives an
output whose strides were left to it, whether two runs agree bit for bit, and the time of one
execute (GPU events) and of its host call. One JSON document on stdout.

    python bench/cudnn_probe.py > probe.json   (GPU machine: cupy, torch, the frontend wheel)
"""

from __future__ import annotations

import json
import sys
import time
import traceback

import cudnn
import cupy as cp
import numpy as np
import torch

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
DT = {"float32": cudnn.data_type.FLOAT, "float16": cudnn.data_type.HALF,
      "bfloat16": cudnn.data_type.BFLOAT16}
TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
HANDLE = cudnn.create_handle()


def strides(dim, layout):
    n, c, h, w = dim
    return [c * h * w, h * w, w, 1] if layout == "nchw" else [h * w * c, 1, w * c, c]


def buffer(t, layout, dtype):
    """A flat CuPy byte buffer holding t (float64 torch, NCHW) in dtype and layout."""
    t = t.to(TORCH[dtype])
    if layout == "nhwc":
        t = t.permute(0, 2, 3, 1)
    t = t.contiguous()
    return t  # torch CUDA tensor: the probe hands cuDNN its pointer


def read(t, dim, layout):
    """Back to NCHW float64."""
    if layout == "nhwc":
        n, c, h, w = dim
        return t.view(n, h, w, c).permute(0, 3, 1, 2).double()
    return t.view(*dim).double()


def graph(kind, dtype, layout, xdim, wdim, ydim, pad, stride, dil, set_out_stride, mode):
    g = cudnn.pygraph(io_data_type=DT[dtype], intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, handle=HANDLE)
    kw = dict(padding=list(pad), stride=list(stride), dilation=list(dil))
    if mode is not None:
        kw["convolution_mode"] = mode
    if kind == "fprop":
        x = g.tensor(name="x", dim=xdim, stride=strides(xdim, layout), data_type=DT[dtype])
        w = g.tensor(name="w", dim=wdim, stride=strides(wdim, layout), data_type=DT[dtype])
        out = g.conv_fprop(image=x, weight=w, compute_data_type=cudnn.data_type.FLOAT, **kw)
        ins, odim = (x, w), ydim
    elif kind == "dgrad":
        dy = g.tensor(name="dy", dim=ydim, stride=strides(ydim, layout), data_type=DT[dtype])
        w = g.tensor(name="w", dim=wdim, stride=strides(wdim, layout), data_type=DT[dtype])
        out = g.conv_dgrad(loss=dy, filter=w, compute_data_type=cudnn.data_type.FLOAT, **kw)
        out.set_dim(xdim)
        ins, odim = (dy, w), xdim
    else:
        x = g.tensor(name="x", dim=xdim, stride=strides(xdim, layout), data_type=DT[dtype])
        dy = g.tensor(name="dy", dim=ydim, stride=strides(ydim, layout), data_type=DT[dtype])
        out = g.conv_wgrad(image=x, loss=dy, compute_data_type=cudnn.data_type.FLOAT, **kw)
        out.set_dim(wdim)
        ins, odim = (x, dy), wdim
    out.set_output(True).set_data_type(DT[dtype])
    if set_out_stride:
        out.set_stride(strides(odim, layout))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    return g, ins, out


def case(kind, dtype, layout, n, c, h, k, r, pad, stride, set_out_stride=True, mode=None):
    torch.manual_seed(0)
    oh = (h + 2 * pad - r) // stride + 1
    xdim, wdim, ydim = [n, c, h, h], [k, c, r, r], [n, k, oh, oh]
    x64 = torch.randn(*xdim, device="cuda", dtype=torch.float64)
    w64 = torch.randn(*wdim, device="cuda", dtype=torch.float64)
    dy64 = torch.randn(*ydim, device="cuda", dtype=torch.float64)
    # the reference sees the rounded inputs
    rx, rw, rdy = (t.to(TORCH[dtype]).double() for t in (x64, w64, dy64))
    if kind == "fprop":
        ref = torch.nn.functional.conv2d(rx, rw, padding=pad, stride=stride)
        a, b = buffer(x64, layout, dtype), buffer(w64, layout, dtype)
        odim = ydim
    elif kind == "dgrad":
        ref = torch.nn.grad.conv2d_input(xdim, rw, rdy, padding=pad, stride=stride)
        a, b = buffer(dy64, layout, dtype), buffer(w64, layout, dtype)
        odim = xdim
    else:
        ref = torch.nn.grad.conv2d_weight(rx, wdim, rdy, padding=pad, stride=stride)
        a, b = buffer(x64, layout, dtype), buffer(dy64, layout, dtype)
        odim = wdim
    g, (ta, tb), out = graph(kind, dtype, layout, xdim, wdim, ydim, (pad, pad), (stride, stride),
                             (1, 1), set_out_stride, mode)
    ws = torch.empty(max(1, g.get_workspace_size()), dtype=torch.uint8, device="cuda")
    o = torch.full((int(np.prod(odim)),), float("nan"), dtype=TORCH[dtype], device="cuda")
    pack = {ta: a.data_ptr(), tb: b.data_ptr(), out: o.data_ptr()}
    g.execute(pack, ws.data_ptr(), handle=HANDLE)
    torch.cuda.synchronize()
    first = o.clone()
    got = read(o, odim, layout)
    scale = ref.abs().max().item()
    err = (got - ref).abs().max().item() / scale
    g.execute(pack, ws.data_ptr(), handle=HANDLE)
    torch.cuda.synchronize()
    same = bool(torch.equal(first.view(torch.int16 if dtype != "float32" else torch.int32),
                            o.view(torch.int16 if dtype != "float32" else torch.int32)))
    # timing: events over 20 executes after warm-up; host time of one execute call
    for _ in range(3):
        g.execute(pack, ws.data_ptr(), handle=HANDLE)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    t0 = time.perf_counter()
    for _ in range(20):
        g.execute(pack, ws.data_ptr(), handle=HANDLE)
    host_us = (time.perf_counter() - t0) / 20 * 1e6
    e1.record()
    torch.cuda.synchronize()
    ms = e0.elapsed_time(e1) / 20
    # torch's own time for the same op in the same dtype and layout
    tx = rx.to(TORCH[dtype])
    tw = rw.to(TORCH[dtype])
    tdy = rdy.to(TORCH[dtype])
    if layout == "nhwc":
        tx, tw, tdy = (t.to(memory_format=torch.channels_last) for t in (tx, tw, tdy))
    fn = {"fprop": lambda: torch.nn.functional.conv2d(tx, tw, padding=pad, stride=stride),
          "dgrad": lambda: torch.nn.grad.conv2d_input(xdim, tw, tdy, padding=pad, stride=stride),
          "wgrad": lambda: torch.nn.grad.conv2d_weight(tx, wdim, tdy, padding=pad,
                                                       stride=stride)}[kind]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0.record()
    for _ in range(20):
        fn()
    e1.record()
    torch.cuda.synchronize()
    torch_ms = e0.elapsed_time(e1) / 20
    return {"kind": kind, "dtype": dtype, "layout": layout, "shape": [n, c, h, k, r, pad, stride],
            "set_out_stride": set_out_stride, "mode": str(mode),
            "out_stride_given": list(out.get_stride()), "rel_err": err,
            "bitwise_rerun": same, "ms": ms, "torch_ms": torch_ms, "host_us": host_us,
            "workspace": g.get_workspace_size()}


def main():
    rows, info = [], {"cudnn_frontend": getattr(cudnn, "__version__", "?"),
                      "cudnn_backend": cudnn.backend_version(), "cupy": cp.__version__,
                      "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                      "behavior_notes": [n for n in dir(cudnn.behavior_note) if n.isupper()],
                      "convolution_modes": [n for n in dir(cudnn._pybind_module.convolution_mode)
                                            if n.isupper()]}
    shapes = [(8, 16, 14, 32, 3, 1, 1), (8, 16, 15, 32, 3, 1, 2), (8, 16, 14, 32, 1, 0, 1),
              (128, 64, 32, 64, 3, 1, 1), (128, 128, 16, 256, 3, 1, 2), (128, 256, 8, 256, 3, 1, 1)]
    plan = []
    for kind in ("fprop", "dgrad", "wgrad"):
        for layout in ("nchw", "nhwc"):
            for s in shapes:
                plan.append((kind, "float32", layout, s, True, None))
            plan.append((kind, "float32", layout, shapes[0], False, None))
        for dtype in ("float16", "bfloat16"):
            for s in (shapes[0], shapes[3]):
                plan.append((kind, dtype, "nhwc", s, True, None))
                plan.append((kind, dtype, "nchw", s, True, None))
    modes = cudnn._pybind_module.convolution_mode
    for m in (modes.CROSS_CORRELATION, modes.CONVOLUTION):
        plan.append(("fprop", "float32", "nchw", shapes[0], True, m))
    for kind, dtype, layout, s, setstride, mode in plan:
        try:
            rows.append(case(kind, dtype, layout, *s, set_out_stride=setstride, mode=mode))
        except Exception as e:  # the probe reports what fails
            rows.append({"kind": kind, "dtype": dtype, "layout": layout, "shape": list(s),
                         "set_out_stride": setstride, "error": f"{type(e).__name__}: {e}",
                         "trace": traceback.format_exc()[-800:]})
    json.dump({"info": info, "rows": rows}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
