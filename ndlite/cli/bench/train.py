"""`ndlite bench train`: the epoch time of the seed CNN on MNIST, ndlite against PyTorch (when
installed) on the same batches: same images, same order, batch 128, RMSprop lr 1e-3.

Epochs of the two alternate (ndlite, torch, ndlite, torch, ...) so that a busy machine slows
both alike; the best epoch of each is compared. Each step runs from a host batch to
`loss.item()`, as `ndlite train` does. PyTorch runs on the CPU, or on CUDA when ndlite runs on
CuPy and PyTorch has CUDA.

    ndlite bench train                          # the bundled subset (6000 digits)
    ndlite bench train --data-dir ../shared/data/mnist --threads 2 --repeats 3
"""

from __future__ import annotations

import time

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


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="the seed CNN's MNIST epoch against PyTorch",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="numpy", metavar="NAME",
                   help="the ndlite backend to time (default: numpy)")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="folder with the MNIST IDX files (default: the bundled subset)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="the first N training digits only (in the shuffled order)")
    p.add_argument("--repeats", type=int, default=2, metavar="N",
                   help="epochs of each framework; the best is compared (default 2)")
    add_common(p, "train")
    p.set_defaults(run=run)


def ndlite_runner(backend):
    import ndlite
    from ndlite.nn import functional as F

    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(backend)
    opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)

    def step(x, y):
        x, y = ndlite.tensor(x, backend=backend), ndlite.tensor(y, backend=backend)
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def torch_runner(torch, device: str):
    from torch import nn
    from torch.nn import functional as F

    torch.manual_seed(0)
    model = nn.Sequential(  # the seed CNN, as ndlite.nn.models.mnist_cnn
        nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3), nn.ReLU(), nn.Flatten(),
        nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 10), nn.LogSoftmax(dim=1)).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def step(x, y):
        x, y = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def run(args) -> int:
    import numpy as np

    from ndlite.data import MNIST, MNISTError

    from ..train import _cli_hint, _fail

    if args.repeats <= 0 or (args.limit is not None and args.limit <= 0):
        return _fail("--repeats and --limit must be positive")
    backend, why = probe(args.backend)
    if backend is None:
        return _fail(f"backend {args.backend} cannot run: {why}")
    try:
        data = MNIST(args.data_dir) if args.data_dir else MNIST.bundled()
    except MNISTError as exc:
        return _fail(_cli_hint(str(exc)))
    source = args.data_dir or "the bundled subset"
    n = len(data) if args.limit is None else min(args.limit, len(data))
    order = np.random.default_rng(0).permutation(len(data))[:n]
    batches = [data.batch(order[i:i + 128]) for i in range(0, n, 128)]
    torch = import_torch(args.threads)
    missing = {}
    runners = {f"ndlite ({backend.name})": ndlite_runner(backend)}
    if torch is None:
        missing["PyTorch epochs"] = f"PyTorch is not installed; {TORCH_HINT}"
    else:
        device = "cuda" if backend.kind == "cupy" and torch.cuda.is_available() else "cpu"
        runners[f"torch ({device})"] = torch_runner(torch, device)
    with thread_limit(args.threads):
        machine = header(f"train: the seed CNN, one epoch of {n} MNIST digits from {source}, "
                         f"batch 128, RMSprop, {' against '.join(runners)}", [backend])
        times: dict[str, list] = {name: [] for name in runners}
        with progress(args.repeats * len(runners) * len(batches), args, "train") as bar:
            for r in range(args.repeats):
                for name, step in runners.items():
                    bar.set_description(f"{name}, epoch {r + 1}/{args.repeats}")
                    start = time.perf_counter()
                    for x, y in batches:
                        step(x, y)
                        bar.update()
                    times[name].append(time.perf_counter() - start)
    print()
    for name, seconds in times.items():
        for r, s in enumerate(seconds):
            print(f"  epoch {r + 1}: {name:16s} {s:7.2f} s  {n / s:7.0f} images/s")
    best = {name: min(ts) for name, ts in times.items()}
    result = {"source": source, "images": n, "batch_size": 128, "optimizer": "RMSprop lr 1e-3",
              "backend": backend.name, "threads": args.threads, "epoch_seconds": times,
              "best_epoch_seconds": best}
    names = list(best)
    if len(names) == 2:
        ratio = best[names[0]] / best[names[1]]
        result["ratio_ndlite_over_torch"] = ratio
        print(f"best epoch: {names[0]} {best[names[0]]:.2f} s, {names[1]} "
              f"{best[names[1]]:.2f} s: ndlite / torch = {ratio:.2f}")
    say_missing(missing)
    write_json(args.json, machine, result, missing)
    return 0
