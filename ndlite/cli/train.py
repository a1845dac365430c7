"""`ndlite train mnist`: train the seed CNN on MNIST and report, per epoch, the training loss,
test accuracy, epoch time and images per second (a tqdm bar runs during each epoch).

    ndlite train mnist --subset --epochs 3            # the bundled subset, offline
    ndlite train mnist --data-dir ../shared/data/mnist --epochs 10 --optimizer adam

`train_epoch` and `evaluate` are reused by bench/train_mnist.py and the tests.
"""

from __future__ import annotations

import json
import sys
import time

DEFAULT_LR = {"rmsprop": 1e-3, "adam": 1e-3, "sgd": 0.05}


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train the seed CNN on MNIST",
                       description="Train the seed CNN (3 conv + 2 fc layers) on MNIST and "
                                   "report loss, test accuracy, epoch time and images/s.")
    p.add_argument("task", choices=["mnist"], help="what to train (mnist)")
    p.add_argument("--backend", default=None,
                   help="numpy, cupy, opencl[:N] or auto (default: $NDLITE_BACKEND or numpy)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--optimizer", choices=sorted(DEFAULT_LR), default="rmsprop")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default: 1e-3 for rmsprop/adam, 0.05 for sgd)")
    p.add_argument("--weight-decay", type=float, default=0.0)
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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", default=None, metavar="PATH",
                   help="write the model and optimizer state to PATH (.npz) after training")
    p.add_argument("--graph", action="store_true",
                   help="cupy only: record one training step as a CUDA graph and replay it "
                        "for every full batch (ndlite.cuda.Trainer)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="train data-parallel on N ranks of this host (MPI on CPUs, NCCL for "
                        "cupy); --batch-size stays the global batch")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="also write the per-epoch results to PATH as JSON")
    p.set_defaults(run=run)


def make_optimizer(name: str, params, lr: float, weight_decay: float):
    from .. import optim

    if name == "sgd":
        return optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    if name == "adam":
        return optim.Adam(params, lr=lr, weight_decay=weight_decay)
    return optim.RMSprop(params, lr=lr, weight_decay=weight_decay)


def train_epoch(model, loader, optimizer, progress=None) -> dict:
    """One pass over `loader`; returns mean loss, images and seconds."""
    from ..nn import functional as F

    model.train()
    total, images, start = 0.0, 0, time.perf_counter()
    batches = progress if progress is not None else loader
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
        value = loss.item()
        total += value * len(y)
        images += len(y)
        if progress is not None:
            progress.set_postfix(loss=f"{value:.4f}", refresh=False)
    seconds = time.perf_counter() - start
    return {"loss": total / max(images, 1), "images": images, "seconds": seconds}


def evaluate(model, loader) -> float:
    """Accuracy of `model` (log-probabilities out) over `loader`."""
    from .. import no_grad

    model.eval()
    correct = count = 0
    with no_grad():
        for x, y in loader:
            predicted = model(x).argmax(dim=1)
            correct += int((predicted == y).sum().item())
            count += len(y)
    return correct / max(count, 1)


def _fail(message: str) -> int:
    print(f"ndlite train: error: {message}", file=sys.stderr)
    return 2


def run(args) -> int:
    import ndlite

    from ..data import MNIST, DataLoader, MNISTError
    from ..errors import BackendUnavailableError

    if args.epochs <= 0:
        return _fail(f"--epochs must be positive, got {args.epochs}")
    if args.batch_size <= 0:
        return _fail(f"--batch-size must be positive, got {args.batch_size}")
    lr = DEFAULT_LR[args.optimizer] if args.lr is None else args.lr
    if lr <= 0 or args.weight_decay < 0:
        return _fail(f"--lr must be positive and --weight-decay non-negative, got {lr} and "
                     f"{args.weight_decay}")
    if args.limit is not None and args.limit <= 0:
        return _fail(f"--limit must be positive, got {args.limit}")
    if args.subset and args.data_dir:
        return _fail("use either --subset or --data-dir, not both")
    from ..distributed import mnist as data_parallel

    if data_parallel.wanted(args):
        return data_parallel.run(args)
    try:
        backend = ndlite.get_backend(args.backend)
    except (BackendUnavailableError, ValueError, KeyError) as exc:
        return _fail(str(exc).splitlines()[0])
    if args.graph and backend.kind != "cupy":
        return _fail(f"--graph needs the cupy backend, not {backend.name}")
    try:
        if args.subset:
            train_set, test_set = MNIST.bundled(True), MNIST.bundled(False)
        else:
            train_set = MNIST(args.data_dir, train=True, download=args.download)
            test_set = MNIST(args.data_dir, train=False, download=args.download)
    except MNISTError as exc:
        return _fail(str(exc))
    if args.limit is not None:
        train_set.images, train_set.labels = (train_set.images[:args.limit],
                                              train_set.labels[:args.limit])

    from tqdm import tqdm

    ndlite.manual_seed(args.seed)
    model = ndlite.nn.models.mnist_cnn().to(backend)
    optimizer = make_optimizer(args.optimizer, model.parameters(), lr, args.weight_decay)
    # with --graph, batches stay on the host: the graph copies them in and checks labels there
    train_loader = DataLoader(train_set, args.batch_size, shuffle=True, seed=args.seed,
                              backend="numpy" if args.graph else backend)
    test_loader = DataLoader(test_set, 1000, backend=backend)
    source = "the bundled subset" if args.subset else train_set.root
    print(f"training the seed CNN on {len(train_set)} MNIST digits from {source}, testing on "
          f"{len(test_set)}; backend {backend.name}, {args.optimizer} lr {lr}, batch "
          f"{args.batch_size}")
    schedule = None
    if args.lr_schedule == "cosine":
        schedule = ndlite.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    elif args.lr_schedule == "step":
        schedule = ndlite.optim.lr_scheduler.StepLR(optimizer, max(args.epochs // 3, 1))
    trainer = None
    if args.graph:
        from ..cuda import Trainer
        from ..nn import functional as F

        trainer = Trainer(model, optimizer, F.nll_loss)
    history = []
    for epoch in range(1, args.epochs + 1):
        bar = tqdm(train_loader, desc=f"epoch {epoch}/{args.epochs}", unit="batch",
                   leave=False, disable=args.no_progress, file=sys.stderr)
        stats = trainer.train_epoch(train_loader, bar) if trainer else \
            train_epoch(model, train_loader, optimizer, bar)
        bar.close()
        accuracy = evaluate(model, test_loader)
        stats.update(epoch=epoch, test_accuracy=accuracy,
                     images_per_second=stats["images"] / stats["seconds"])
        history.append(stats)
        if schedule is not None:
            stats["lr"] = schedule.get_last_lr()[0]
            schedule.step()
        print(f"epoch {epoch:2d}  train loss {stats['loss']:.4f}  test accuracy "
              f"{100 * accuracy:.2f}%  epoch time {stats['seconds']:.1f} s  "
              f"{stats['images_per_second']:.0f} images/s", flush=True)
    if args.save:
        ndlite.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "epochs": args.epochs}, args.save)
        print(f"saved the model and optimizer state to {args.save}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(["ndlite", *sys.argv[1:]]),
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "args": {k: v for k, v in vars(args).items() if k != "run"},
                       "backend": backend.name, "device": backend.device_name(),
                       "epochs": history}, f, indent=2)
    return 0
