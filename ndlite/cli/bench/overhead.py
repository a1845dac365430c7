"""`ndlite bench overhead`: what one op costs on tiny tensors, where the time is all overhead,
against raw NumPy and PyTorch CPU eager (when installed) in the same run.

Per op on 8-element float32 tensors: NumPy itself, ndlite (grad recording off and on) and
PyTorch (off and on); then a bias-free Linear layer's forward + backward at batch 4, ndlite
against PyTorch. Without PyTorch its columns are left out and the run says so.

    ndlite bench overhead [--backend numpy] [--threads 1]
"""

from __future__ import annotations

from ...benchmark import seconds_per_call
from ...device.registry import probe
from .common import (
    TORCH_HINT,
    add_common,
    header,
    import_torch,
    progress,
    say_missing,
    thread_limit,
    write_json,
)

OPS = ["add", "mul", "add scalar", "exp", "relu", "sum", "reshape", "slice", "matmul 8x8"]
LINEAR_SIZES = (5, 50, 500)


def add_parser(sub) -> None:
    p = sub.add_parser("overhead", help="per-op time on tiny tensors against NumPy and PyTorch",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="numpy", metavar="NAME",
                   help="the ndlite backend to time (default: numpy)")
    p.add_argument("--budget", type=float, default=0.3, metavar="SECONDS",
                   help="about the time spent on each measurement (default 0.3)")
    p.add_argument("--repeats", type=int, default=7, metavar="N",
                   help="timed runs per measurement; the median is kept (default 7)")
    add_common(p, "overhead")
    p.set_defaults(run=run)


def numpy_ops(np):
    a, b = np.ones(8, np.float32), np.full(8, 2.0, np.float32)
    m = np.ones((8, 8), np.float32)
    return {
        "add": lambda: a + b, "mul": lambda: a * b, "add scalar": lambda: a + 1.0,
        "exp": lambda: np.exp(a), "relu": lambda: np.maximum(a, 0), "sum": lambda: a.sum(),
        "reshape": lambda: a.reshape(2, 4), "slice": lambda: a[1:5], "matmul 8x8": lambda: m @ m,
    }


def tensor_ops(lib, requires_grad, **where):
    """The same ops through ndlite or torch (their tensor APIs agree on these)."""
    a = lib.ones(8, requires_grad=requires_grad, **where)
    b = lib.full((8,), 2.0, **where)
    m = lib.ones(8, 8, requires_grad=requires_grad, **where)
    return {
        "add": lambda: a + b, "mul": lambda: a * b, "add scalar": lambda: a + 1.0,
        "exp": lambda: a.exp(), "relu": lambda: a.relu(), "sum": lambda: a.sum(),
        "reshape": lambda: a.reshape(2, 4), "slice": lambda: a[1:5], "matmul 8x8": lambda: m @ m,
    }


def linear_steps(ndlite, torch, np, n, backend):
    """forward + backward of y = x @ W.T at batch 4, n -> n neurons, on each library."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((4, n)).astype(np.float32)
    w_np = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    g_np = rng.standard_normal((4, n)).astype(np.float32)
    F = ndlite.nn.functional
    x, g = ndlite.tensor(x_np, backend=backend), ndlite.tensor(g_np, backend=backend)
    w = ndlite.tensor(w_np, requires_grad=True, backend=backend)

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
    return steps


def run(args) -> int:
    import numpy as np

    import ndlite

    from ..train import _fail

    backend, why = probe(args.backend)
    if backend is None:
        return _fail(f"backend {args.backend} cannot run: {why}")
    torch = import_torch(args.threads)
    missing = {} if torch is not None else {
        "torch, torch+grad columns": f"PyTorch is not installed; {TORCH_HINT}"}
    sync = backend.synchronize
    with thread_limit(args.threads):
        machine = header(f"overhead: per-op time on 8-element float32 tensors, ndlite on "
                         f"{backend.name} against NumPy" + (" and PyTorch CPU eager"
                                                            if torch else ""), [backend])
        columns = {"numpy": numpy_ops(np),
                   "ndlite": tensor_ops(ndlite, False, backend=backend),
                   "ndlite+grad": tensor_ops(ndlite, True, backend=backend)}
        if torch is not None:
            columns["torch"] = tensor_ops(torch, False)
            columns["torch+grad"] = tensor_ops(torch, True)
        table, linear = {}, {}
        with progress(len(OPS) * len(columns) + len(LINEAR_SIZES), args, "overhead") as bar:
            for op in OPS:
                table[op] = {}
                for name, fns in columns.items():
                    bar.set_description(f"{op}: {name}")
                    table[op][name] = seconds_per_call(
                        fns[op], sync if name.startswith("ndlite") else None, args.budget,
                        args.repeats) * 1e6
                    bar.update()
            for n in LINEAR_SIZES:
                bar.set_description(f"Linear {n}")
                steps = linear_steps(ndlite, torch, np, n, backend)
                linear[str(n)] = {name: seconds_per_call(
                    fn, sync if name == "ndlite" else None, args.budget, args.repeats) * 1e6
                    for name, fn in steps.items()}
                bar.update()
    print("\nmicroseconds per call (median)")
    print(f"{'op':12s}" + "".join(f"{c:>13s}" for c in columns) +
          ("   ndlite/torch" if torch else ""))
    for op, row in table.items():
        ratio = f"{row['ndlite'] / row['torch']:15.2f}" if torch else ""
        print(f"{op:12s}" + "".join(f"{row[c]:13.2f}" for c in columns) + ratio)
    print("\nLinear forward+backward at batch 4 (bias-free, grad of W), microseconds (median)")
    for n, row in linear.items():
        ratio = f"  ndlite/torch {row['ndlite'] / row['torch']:.2f}" if torch else ""
        print(f"{n:>4s} neurons: " + "  ".join(f"{k} {v:8.1f}" for k, v in row.items()) + ratio)
    say_missing(missing)
    write_json(args.json, machine, {"backend": backend.name, "threads": args.threads,
                                    "unit": "microseconds", "per_op_8_float32": table,
                                    "linear_batch4_fwd_bwd": linear}, missing)
    return 0
