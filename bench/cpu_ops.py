"""The CPU models' ops one by one, ndlite's NumPy backend against PyTorch CPU at N threads
(issue 20): the backend primitive and its ATen twin on the same shapes (those of the VGG-style
net, the seed CNN and the MLP in bench/cpu_models.py), calls alternating in blocks, the median
of each. Says which op the step-level gap of bench/cpu_models.py comes from.

    python bench/cpu_ops.py --threads 16 [--repeat 30] [--only relu matmul]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def cases(b, torch, np):
    """(name, ndlite call, torch call) for every case, on fixed random data."""
    rng = np.random.default_rng(0)
    aten = torch.ops.aten

    def pair(*shape):
        a = rng.standard_normal(shape, dtype=np.float32)
        return a, torch.from_numpy(a.copy())

    out = []
    for shape in ((32, 32, 32, 32), (32, 128, 8, 8), (128, 32, 24, 24)):
        tag = "x".join(map(str, shape))
        (x, tx), (g, tg) = pair(*shape), pair(*shape)
        y, ty = np.maximum(x, 0), torch.relu(tx)
        c = shape[1]
        (w, tw), (bias, tb) = pair(c), pair(c)
        out += [
            (f"relu {tag}", lambda x=x: b.relu(x), lambda tx=tx: torch.relu(tx)),
            (f"relu_grad {tag}", lambda g=g, y=y: b.relu_grad(g, y),
             lambda tg=tg, ty=ty: torch.ops.aten.threshold_backward(tg, ty, 0)),
            (f"bias add {tag}", lambda x=x, bias=bias, c=c: b.add(x, bias.reshape(1, c, 1, 1)),
             lambda tx=tx, tb=tb, c=c: tx + tb.view(1, c, 1, 1)),
            (f"channel sum {tag}", lambda g=g: b.sum(g, (0, 2, 3), False),
             lambda tg=tg: tg.sum((0, 2, 3))),
            (f"max_pool2d {tag}",
             lambda x=x: b.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False),
             lambda tx=tx: torch.ops.aten.max_pool2d_with_indices(tx, [2, 2], [2, 2])),
        ]
        _, idx = b.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False)
        tv, tidx = torch.ops.aten.max_pool2d_with_indices(tx, [2, 2], [2, 2])
        gp, tgp = pair(*tv.shape)
        out.append((f"max_pool2d_grad {tag}",
                    lambda gp=gp, idx=idx, s=shape: b.max_pool2d_grad(
                        gp, idx, s, (2, 2), (2, 2), (0, 0), (1, 1), False),
                    lambda tgp=tgp, tx=tx, tidx=tidx: aten.max_pool2d_with_indices_backward(
                        tgp, tx, [2, 2], [2, 2], [0, 0], [1, 1], False, tidx)))
        if shape[0] == 32:
            _, mean, invstd, _ = b.batch_norm(x, w, bias, 1e-5)
            tmean, tinv = torch.from_numpy(mean), torch.from_numpy(invstd)
            out += [
                (f"batch_norm {tag}",
                 lambda x=x, w=w, bias=bias: b.batch_norm(x, w, bias, 1e-5),
                 lambda tx=tx, tw=tw, tb=tb: torch.native_batch_norm(
                     tx, tw, tb, None, None, True, 0.1, 1e-5)),
                (f"batch_norm_grad {tag}",
                 lambda g=g, x=x, w=w, m=mean, i=invstd: b.batch_norm_grad(g, x, w, m, i, True),
                 lambda tg=tg, tx=tx, tw=tw, m=tmean, i=tinv: aten.native_batch_norm_backward(
                     tg, tx, tw, None, None, m, i, True, 1e-5, [True, True, True])),
            ]
    # the VGG-style net's middle convolution and the seed CNN's second
    for xs, ws, pad in (((32, 64, 16, 16), (64, 64, 3, 3), 1),
                        ((128, 32, 12, 12), (64, 32, 5, 5), 0)):
        (x, tx), (w, tw) = pair(*xs), pair(*ws)
        geo = ((1, 1), (pad, pad), (1, 1), 1)
        ty = torch.conv2d(tx, tw, None, 1, pad)
        g, tg = pair(*ty.shape)
        tag = f"{'x'.join(map(str, xs))} w{'x'.join(map(str, ws))}"
        out += [
            (f"conv2d {tag}", lambda x=x, w=w, geo=geo: b.conv2d(x, w, *geo),
             lambda tx=tx, tw=tw, pad=pad: torch.conv2d(tx, tw, None, 1, pad)),
            (f"conv2d grads {tag}",
             lambda x=x, w=w, g=g, geo=geo: (b.conv2d_grad_input(g, w, x.shape, *geo),
                                             b.conv2d_grad_weight(x, g, w.shape, *geo)),
             lambda tx=tx, tw=tw, tg=tg, pad=pad: torch.ops.aten.convolution_backward(
                 tg, tx, tw, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1,
                 [True, True, False])),
        ]
    # the MLP's products: forward x @ W.T, the input's gradient g @ W, the weight's g.T @ x
    for m, k, n in ((256, 784, 1024), (256, 1024, 1024)):
        (x, tx), (w, tw), (g, tg) = pair(m, k), pair(n, k), pair(m, n)
        tag = f"{m}x{k}x{n}"
        out += [
            (f"x @ W.T {tag}", lambda x=x, w=w: b.matmul(x, w.T), lambda tx=tx, tw=tw: tx @ tw.T),
            (f"g @ W {tag}", lambda g=g, w=w: b.matmul(g, w), lambda tg=tg, tw=tw: tg @ tw),
            (f"g.T @ x {tag}", lambda g=g, x=x: b.matmul(g.T, x), lambda tg=tg, tx=tx: tg.T @ tx),
        ]
    (p, tp), (gr, tgr) = pair(1 << 20), pair(1 << 20)
    m1, v1 = np.zeros_like(p), np.zeros_like(p)
    tm, tv = torch.zeros_like(tp), torch.zeros_like(tp)
    state = {"step": torch.tensor(1.0)}
    out.append(("adam_step 1M", lambda: b.adam_step(p, gr, m1, v1, None, 1, 1e-3, 0.9, 0.999,
                                                    1e-8, 0.0, False),
                lambda: torch._fused_adam_([tp], [tgr], [tm], [tv], [], [state["step"]],
                                           lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.0,
                                           eps=1e-8, amsgrad=False, maximize=False)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--block", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    n = common.pin_threads(args.threads)
    import numpy as np
    import torch

    import ndlite

    torch.set_num_threads(n)
    b = ndlite.get_backend("numpy")
    print(f"threads {n}; torch {torch.__version__}; {b.info().get('threads')}")
    print(f"{'case':44s} {'ndlite ms':>10s} {'torch ms':>10s} {'ratio':>7s}")
    for name, ours, theirs in cases(b, torch, np):
        if args.only and not any(o in name for o in args.only):
            continue
        times = {ours: [], theirs: []}
        for _ in range(args.repeat):
            for fn in (ours, theirs):
                for j in range(args.block):
                    t0 = time.perf_counter()
                    fn()
                    if j:
                        times[fn].append(time.perf_counter() - t0)
        a, t = (statistics.median(times[f]) * 1e3 for f in (ours, theirs))
        print(f"{name:44s} {a:10.3f} {t:10.3f} {a / t:7.2f}", flush=True)


if __name__ == "__main__":
    main()
