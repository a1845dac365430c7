"""`ndlite bench crossover`: where a GPU (or any other backend) starts to beat the CPU, measured
on this machine, for a Linear layer and for a model shape of your choosing.

Every GPU kernel launch costs microseconds of host work, so small tensors run faster on the
CPU and large ones on a GPU. Two sweeps, on every available backend:

- a bias-free Linear layer (n -> n) at batch 4, forward and backward, for growing n;
- a training step (forward, cross-entropy, backward, SGD) of an MLP with the widths of
  `--model` (default 784,512,512,10), for growing batch sizes (ndlite.select_backend's step).

Prints a table per sweep with the fastest backend of each row, writes JSON and draws both
sweeps to a PNG (with matplotlib). Each point is the median of a few timed runs, and the best
of `--rounds` passes over the whole sweep.

    ndlite bench crossover
    ndlite bench crossover --model 3072,1024,10 --batches 1 32 1024 --backends numpy cupy
"""

from __future__ import annotations

import numpy as np

from ...benchmark import seconds_per_call
from .common import (
    PLOT_HINT,
    add_common,
    header,
    progress,
    resolve_backends,
    say_missing,
    thread_limit,
    write_json,
)

SIZES = [5, 50, 500, 2000, 8000]
MODEL = "784,512,512,10"
BATCHES = [1, 16, 128, 1024]


def add_parser(sub) -> None:
    p = sub.add_parser("crossover", help="where each backend starts to beat the CPU: a Linear "
                                         "layer and your model shape, table + PNG",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", nargs="+", metavar="NAME",
                   help="backends to compare (default: every known one; unavailable ones are "
                        "listed with the reason)")
    p.add_argument("--sizes", nargs="+", type=int, default=SIZES, metavar="N",
                   help=f"Linear widths (default: {' '.join(map(str, SIZES))})")
    p.add_argument("--batch", type=int, default=4, help="the Linear sweep's batch (default 4)")
    p.add_argument("--model", default=MODEL, metavar="WIDTHS",
                   help=f"an MLP's layer widths, input first (default: {MODEL})")
    p.add_argument("--batches", nargs="+", type=int, default=BATCHES, metavar="B",
                   help=f"the model sweep's batch sizes (default: {' '.join(map(str, BATCHES))})")
    p.add_argument("--budget", type=float, default=0.3, metavar="SECONDS",
                   help="about the time spent on each measurement (default 0.3)")
    p.add_argument("--rounds", type=int, default=2, metavar="N",
                   help="run the sweeps N times, keeping each point's best: a machine busy "
                        "with other work slows some rounds, not the best (default 2)")
    p.add_argument("--plot", default="ndlite-bench-crossover.png", metavar="PNG",
                   help="draw both sweeps to PNG (default: ndlite-bench-crossover.png)")
    p.add_argument("--no-plot", action="store_true", help="draw nothing")
    add_common(p, "crossover")
    p.set_defaults(run=run)


def linear_step(backend, n: int, batch: int):
    """forward + backward of y = x @ W.T (n -> n), the gradient of W, on `backend`."""
    import ndlite

    rng = np.random.default_rng(0)
    x = ndlite.tensor(rng.standard_normal((batch, n)).astype(np.float32), backend=backend)
    w = ndlite.tensor((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
                      backend=backend, requires_grad=True)
    g = ndlite.tensor(rng.standard_normal((batch, n)).astype(np.float32), backend=backend)
    linear = ndlite.nn.functional.linear

    def step():
        w.grad = None
        linear(x, w).backward(g)

    return step


def mlp(widths: list[int]):
    import ndlite

    layers = []
    for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(ndlite.nn.Linear(n_in, n_out))
        if i < len(widths) - 2:
            layers.append(ndlite.nn.ReLU())
    return ndlite.nn.Sequential(*layers)


def parse_widths(text: str) -> list[int]:
    try:
        widths = [int(w) for w in text.replace("x", ",").split(",") if w.strip()]
    except ValueError:
        widths = []
    if len(widths) < 2 or min(widths) <= 0:
        raise ValueError(f"--model: expected positive layer widths like 784,512,10, got {text!r}")
    return widths


def _measurer(args, widths):
    """measure(sweep, key, backend) -> seconds per step of one point of a sweep."""
    import ndlite

    model = mlp(widths)
    loss = ndlite.nn.functional.cross_entropy
    rng = np.random.default_rng(0)
    data = {batch: (rng.standard_normal((batch, widths[0])).astype(np.float32),
                    rng.integers(0, widths[-1], batch)) for batch in args.batches}

    def measure(sweep, key, backend):
        if sweep == "linear":
            return seconds_per_call(linear_step(backend, key, args.batch), backend.synchronize,
                                    args.budget)
        x, y = data[key]
        choice = ndlite.select_backend(model, x, y, loss_fn=loss, backends=[backend],
                                       budget=args.budget)
        return choice.seconds[backend.name]

    return measure


def print_sweep(title: str, label: str, table: dict, names: list[str]) -> dict:
    """Print one sweep; returns {backend: first row where it beats the first backend}."""
    print(f"\n{title}, microseconds per step (median)")
    print(f"{label:>8s}" + "".join(f"{n:>14s}" for n in names) + "   fastest")
    for key, row in table.items():
        cells = "".join(f"{row[n]:14.1f}" if n in row else f"{'failed':>14s}" for n in names)
        fastest = min(row, key=row.get) if row else "-"
        print(f"{key:8d}" + cells + f"   {fastest}")
    base, crossover = names[0], {}
    for name in names[1:]:
        wins = [k for k, row in table.items() if name in row and base in row and
                row[name] < row[base]]
        crossover[name] = wins[0] if wins else None
        print(f"  {name} beats {base} from {label} {wins[0]} on" if wins else
              f"  {name} never beats {base} here")
    return crossover


def plot(path: str, result: dict, names: list[str], machine: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
    sweeps = [("linear", "neurons (Linear n -> n)",
               f"Linear layer, batch {result['batch']}: forward + backward"),
              ("model_steps", "batch size", f"MLP {result['model']}: one training step")]
    for ax, (key, xlabel, title) in zip(axes, sweeps):
        table = result[key]
        for name in names:
            points = [(int(k), row[name]) for k, row in table.items() if name in row]
            if points:
                ax.plot(*zip(*points), "o-", label=f"{name} ({machine['devices'][name]})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("microseconds per step")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Where each backend starts to pay, on {machine['cpu']} "
                 f"({machine['cpus']['logical']} CPUs); ndlite bench crossover", fontsize=11)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _sweep(args, widths, backends, result: dict) -> dict:
    """Fill result["linear"] and result["model_steps"] with microseconds per step, the best of
    `args.rounds` passes; returns {point: why} for the points that failed."""
    failures = {}
    points = [("linear", n, b) for n in args.sizes for b in backends] + \
             [("model_steps", batch, b) for batch in args.batches for b in backends]
    measure = _measurer(args, widths)
    with progress(args.rounds * len(points), args, "crossover") as bar:
        for round_ in range(args.rounds):  # whole sweeps, best of each point kept
            for sweep, key, b in points:
                what = f"{'Linear' if sweep == 'linear' else 'MLP batch'} {key} on {b.name}"
                bar.set_description(f"round {round_ + 1}: {what}")
                row = result[sweep][str(key)]
                if what not in failures:
                    try:
                        seconds = measure(sweep, key, b)
                        row[b.name] = min(row.get(b.name, seconds * 1e6), seconds * 1e6)
                    except Exception as exc:  # noqa: BLE001 - out of memory, say: reported
                        failures[what] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                bar.update()
    return failures


def run(args) -> int:
    from ..train import _fail

    try:
        widths = parse_widths(args.model)
    except ValueError as exc:
        return _fail(str(exc))
    if args.rounds <= 0 or args.budget <= 0:
        return _fail("--rounds and --budget must be positive")
    backends, unavailable = resolve_backends(args.backends)
    if not backends:
        return _fail("no backend can run here: " +
                     "; ".join(f"{k}: {v}" for k, v in unavailable.items()))
    missing = {f"backend {name}": why for name, why in unavailable.items()}
    drawing = not args.no_plot
    if drawing:
        from ..metrics import matplotlib_missing

        why = matplotlib_missing()
        if why:
            missing["plot"] = f"matplotlib is not installed; {PLOT_HINT}"
            drawing = False
    names = [b.name for b in backends]
    with thread_limit(args.threads):
        machine = header(f"crossover: Linear n -> n at batch {args.batch} and MLP "
                         f"{'-'.join(map(str, widths))} by batch size, on "
                         f"{', '.join(names)}", backends)
        result = {"batch": args.batch, "model": "-".join(map(str, widths)),
                  "unit": "microseconds per step", "rounds": args.rounds,
                  "linear": {str(n): {} for n in args.sizes},
                  "model_steps": {str(b): {} for b in args.batches}}
        failures = _sweep(args, widths, backends, result)
    result["linear_crossover"] = print_sweep(
        f"Linear n -> n at batch {args.batch}, forward + backward", "neurons",
        {int(k): v for k, v in result["linear"].items()}, names)
    result["model_crossover"] = print_sweep(
        f"MLP {result['model']}, training step", "batch",
        {int(k): v for k, v in result["model_steps"].items()}, names)
    missing.update(failures)
    say_missing(missing)
    if drawing:
        plot(args.plot, result, names, machine)
        print(f"drew {args.plot}")
    write_json(args.json, machine, result, missing)
    return 0
