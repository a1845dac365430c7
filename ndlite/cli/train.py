"""`ndlite train mnist`: train the seed CNN on MNIST and report, per epoch, the training loss,
test accuracy, epoch time and images per second (a tqdm bar runs during each epoch).
`ndlite train gpt` is in train_gpt.py.

    ndlite train mnist --subset --epochs 3            # the bundled subset, offline
    ndlite train mnist --data-dir ../shared/data/mnist --epochs 10 --lr-schedule cosine
    ndlite train mnist --subset --metrics run.jsonl --plot run.png   # curves as JSON and PNG

The default optimizer is Adam: its bias correction keeps the first steps at the size of the
learning rate. RMSprop's running average starts at zero, so its first step moves every weight
by about 10x the learning rate (PyTorch's RMSprop does the same); a long run recovers, but a
quick one (`--limit 512`: four steps) ended worse than chance.

`train_epoch` and `evaluate` are reused by the tests.
"""

from __future__ import annotations

import json
import sys
import time

from . import train_gpt, train_parallel
from .steps import (
    DEFAULT_LR,
    DEFAULT_OPTIMIZER,
    Mixed,
    add_amp_option,
    evaluate,
    make_optimizer,
    mixed_step,
    save_checkpoint,
    train_epoch,
)
from .steps import (
    fail as _fail,
)


def add_parser(sub) -> None:
    train = sub.add_parser("train", help="train the seed CNN on MNIST or a GPT on text",
                           description="Train a reference model: `ndlite train mnist` (the "
                                       "seed CNN) or `ndlite train gpt` (a character GPT).")
    tasks = train.add_subparsers(dest="task", required=True, metavar="{mnist,gpt}")
    p = tasks.add_parser("mnist", help="train the seed CNN on MNIST",
                         description="Train the seed CNN (3 conv + 2 fc layers) on MNIST and "
                                     "report loss, test accuracy, epoch time and images/s.")
    train_gpt.add_parser(tasks)
    p.add_argument("--backend", default=None,
                   help="numpy, cupy, opencl[:N] or auto (default: $NDLITE_BACKEND or numpy)")
    p.add_argument("--epochs", type=int, default=3, metavar="N",
                   help="passes over the training digits (default: 3)")
    p.add_argument("--batch-size", type=int, default=128, metavar="N",
                   help="training digits per step (default: 128)")
    p.add_argument("--optimizer", choices=sorted(DEFAULT_LR), default=DEFAULT_OPTIMIZER,
                   help=f"default: {DEFAULT_OPTIMIZER} (its first steps are the size of --lr; "
                        "rmsprop's are about 10x that)")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default: 1e-3 for rmsprop/adam, 0.05 for sgd)")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="L2 penalty added to each gradient (default: 0)")
    p.add_argument("--lr-schedule", choices=["none", "cosine", "step"], default="none",
                   help="cosine: anneal to 0 over the epochs; step: x0.1 every third of them")
    p.add_argument("--data-dir", default=None,
                   help="folder with the MNIST IDX files (default: $NDLITE_DATA_DIR or the "
                        "download cache)")
    p.add_argument("--subset", action="store_true",
                   help="use the small MNIST subset bundled with ndlite (offline)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="train on the first N training digits only (quick runs)")
    p.add_argument("--download", action="store_true",
                   help="download missing MNIST files (SHA-256 checked)")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the initial weights and the shuffling: the same seed on the "
                        "same backend gives the same run (default: 0)")
    p.add_argument("--save", default=None, metavar="PATH",
                   help="write the model and optimizer state to PATH (.npz) after training")
    p.add_argument("--graph", action="store_true",
                   help="cupy only: record one training step as a CUDA graph and replay it "
                        "for every full batch (ndlite.cuda.Trainer)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_amp_option(p)
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="train data-parallel on N ranks of this host (MPI on CPUs, NCCL for "
                        "cupy); --batch-size stays the global batch")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="also write the per-epoch results to PATH as JSON")
    p.add_argument("--metrics", default=None, metavar="FILE",
                   help="write JSON lines to FILE as training goes: the mean loss of every "
                        "--log-every steps, and each epoch's loss, accuracy and time")
    p.add_argument("--log-every", type=int, default=10, metavar="N",
                   help="steps per --metrics line (default: 10)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="draw the loss and accuracy curves to PNG after training (needs "
                        "matplotlib: pip install 'ndlite[plot]')")
    p.set_defaults(run=run)


def _cli_hint(message: str) -> str:
    """MNISTError speaks to code (download=True); say it as this command's option."""
    return message.replace("pass download=True", "pass --download")


def _invalid(args, lr: float) -> str:
    """What is wrong with the arguments ("" when nothing)."""
    if args.epochs <= 0:
        return f"--epochs must be positive, got {args.epochs}"
    if args.batch_size <= 0:
        return f"--batch-size must be positive, got {args.batch_size}"
    if lr <= 0 or args.weight_decay < 0:
        return (f"--lr must be positive and --weight-decay non-negative, got {lr} and "
                f"{args.weight_decay}")
    if args.limit is not None and args.limit <= 0:
        return f"--limit must be positive, got {args.limit}"
    if args.subset and args.data_dir:
        return "use either --subset or --data-dir, not both"
    if args.log_every <= 0:
        return f"--log-every must be positive, got {args.log_every}"
    if args.amp and (args.graph or args.nproc > 1):
        return "--amp does not combine with --graph or --nproc yet"
    if args.plot:
        from .metrics import matplotlib_missing

        why = matplotlib_missing()
        if why:
            return f"--plot needs matplotlib ({why}): pip install 'ndlite[plot]'"
    return ""


def _datasets(args):
    """(train, test) MNIST as the arguments ask; raises MNISTError."""
    from ..data import MNIST

    if args.subset:
        train_set, test_set = MNIST.bundled(True), MNIST.bundled(False)
    else:
        train_set = MNIST(args.data_dir, train=True, download=args.download)
        test_set = MNIST(args.data_dir, train=False, download=args.download)
    if args.limit is not None:
        train_set.images, train_set.labels = (train_set.images[:args.limit],
                                              train_set.labels[:args.limit])
    return train_set, test_set


def _schedule(name: str, optimizer, epochs: int):
    from ..optim import lr_scheduler

    if name == "cosine":
        return lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    if name == "step":
        return lr_scheduler.StepLR(optimizer, max(epochs // 3, 1))
    return None


def _fit(args, model, optimizer, backend, train_set, test_set, log) -> list[dict]:
    """The epochs: train, test, print a line, log; returns each epoch's statistics."""
    from tqdm import tqdm

    from ..data import DataLoader

    # with --graph, batches stay on the host: the graph copies them in and checks labels there
    train_loader = DataLoader(train_set, args.batch_size, shuffle=True, seed=args.seed,
                              backend="numpy" if args.graph else backend)
    test_loader = DataLoader(test_set, 1000, backend=backend)
    schedule = _schedule(args.lr_schedule, optimizer, args.epochs)
    mixed = Mixed(args.amp, backend)
    step = mixed_step(model, optimizer, mixed) if args.amp else None
    if args.graph:
        from ..cuda import Trainer
        from ..nn import functional as F

        step = Trainer(model, optimizer, F.nll_loss).step
    history = []
    for epoch in range(1, args.epochs + 1):
        bar = tqdm(train_loader, desc=f"epoch {epoch}/{args.epochs}", unit="batch",
                   leave=False, disable=args.no_progress, file=sys.stderr)
        log.epoch_started(epoch)
        stats = train_epoch(model, train_loader, optimizer, bar, on_step=log.step, step=step)
        bar.close()
        with mixed.region():
            accuracy = evaluate(model, test_loader)
        stats.update(epoch=epoch, test_accuracy=accuracy,
                     images_per_second=stats["images"] / stats["seconds"])
        history.append(stats)
        if schedule is not None:
            stats["lr"] = schedule.get_last_lr()[0]
            schedule.step()
        log.epoch_done(stats)
        print(f"epoch {epoch:2d}  train loss {stats['loss']:.4f}  test accuracy "
              f"{100 * accuracy:.2f}%  epoch time {stats['seconds']:.1f} s  "
              f"{stats['images_per_second']:.0f} images/s", flush=True)
    return history


def _write_outputs(args, model, optimizer, backend, history, log, title: str) -> None:
    """--metrics (already written), --plot, --save and --json."""

    from .metrics import plot_curves

    if args.metrics:
        print(f"wrote the training curves to {args.metrics} (JSON lines)")
    if args.plot:
        plot_curves(log.records, args.plot, title)
        print(f"drew the loss and accuracy curves to {args.plot}")
    if args.save:
        save_checkpoint(model, optimizer, args.epochs, args.save)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(["ndlite", *sys.argv[1:]]),
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "args": {k: v for k, v in vars(args).items() if k != "run"},
                       "backend": backend.name, "device": backend.device_name(),
                       "epochs": history}, f, indent=2)


def run(args) -> int:
    import ndlite

    from ..data import MNISTError
    from ..errors import BackendUnavailableError
    from .metrics import MetricsLog

    lr = DEFAULT_LR[args.optimizer] if args.lr is None else args.lr
    problem = _invalid(args, lr)
    if problem:
        return _fail(problem)
    if train_parallel.wanted(args):
        return train_parallel.run(args)
    try:
        backend = ndlite.get_backend(args.backend)
    except (BackendUnavailableError, ValueError, KeyError) as exc:
        return _fail(str(exc).splitlines()[0])
    if args.graph and backend.kind != "cupy":
        return _fail(f"--graph needs the cupy backend, not {backend.name}")
    if Mixed.problem(args.amp, backend):
        return _fail(Mixed.problem(args.amp, backend))
    try:
        train_set, test_set = _datasets(args)
    except MNISTError as exc:
        return _fail(_cli_hint(str(exc)))
    ndlite.manual_seed(args.seed)
    model = ndlite.nn.models.mnist_cnn().to(backend)
    optimizer = make_optimizer(args.optimizer, model.parameters(), lr, args.weight_decay)
    source = "the bundled subset" if args.subset else train_set.root
    print(f"training the seed CNN on {len(train_set)} MNIST digits from {source}, testing on "
          f"{len(test_set)}; backend {backend.name}, {args.optimizer} lr {lr}, batch "
          f"{args.batch_size}" + (f", {Mixed(args.amp, backend).describe()}" if args.amp else ""))
    log = MetricsLog(args.metrics, args.log_every, len(train_set))
    try:
        history = _fit(args, model, optimizer, backend, train_set, test_set, log)
    finally:
        log.close()
    title = f"seed CNN on {len(train_set)} MNIST digits, {backend.name}, {args.optimizer}"
    _write_outputs(args, model, optimizer, backend, history, log, title)
    return 0
