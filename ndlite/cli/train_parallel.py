"""`ndlite train mnist --nproc N`: the seed CNN trained data-parallel on N ranks of this host.

`--batch-size` stays the global batch: each rank takes batch/N digits of it through a
DistributedSampler, and DistributedDataParallel averages the gradients, so a step is one
process's step at that batch up to the order of the additions. The command relaunches itself
through the launcher (`ndlite.distributed.run`): each rank runs `python -m
ndlite.cli.train_parallel`, which reads the parsed options from NDLITE_TRAIN_ARGS. Loss, test
accuracy (the test set split over the ranks, counts summed) and images/s are reported by rank
0 for all ranks together. `ndlite run --nproc-per-node N -m ndlite train mnist ...` gets here
too (WORLD_SIZE > 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tqdm import tqdm

import ndlite

from .. import distributed as dist
from ..cuda import Trainer
from ..data import MNIST, DataLoader, DistributedSampler, MNISTError
from ..distributed import ReduceOp, all_reduce
from ..distributed.run import LaunchError, launch
from ..nn import functional as F
from ..nn.parallel import DistributedDataParallel
from .steps import DEFAULT_LR, make_optimizer, save_checkpoint, train_epoch
from .steps import fail as _fail

ARGS_VARIABLE = "NDLITE_TRAIN_ARGS"


def wanted(args) -> bool:
    """Whether `ndlite train` should train data-parallel: --nproc > 1, or inside a job."""
    return getattr(args, "nproc", 1) != 1 or int(os.environ.get("WORLD_SIZE", "1")) > 1


def run(args) -> int:
    """From `ndlite train`: start the ranks, or (inside a job) be one."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if "RANK" in os.environ and world > 1:
        if args.nproc not in (1, world):
            return _fail(f"--nproc {args.nproc} inside a job of {world} ranks")
        return train_rank(args)
    if args.nproc < 1:
        return _fail(f"--nproc must be at least 1, got {args.nproc}")
    if args.batch_size % args.nproc:
        return _fail(f"--batch-size {args.batch_size} (the global batch) must divide evenly "
                     f"among {args.nproc} ranks")

    options = {k: v for k, v in vars(args).items() if k != "run"}
    options["command_line"] = " ".join(["ndlite", *sys.argv[1:]])
    spec = args.backend or os.environ.get("NDLITE_BACKEND", "")
    engine = "nccl" if spec.startswith("cupy") else "auto"
    try:
        return launch(["-m", "ndlite.cli.train_parallel"], args.nproc, engine=engine,
                      env=dict(os.environ, **{ARGS_VARIABLE: json.dumps(options)}))
    except LaunchError as exc:
        return _fail(str(exc))


def _device(args):
    """This rank's backend: cupy means cupy:LOCAL_RANK (one GPU per rank)."""
    spec = args.backend or os.environ.get("NDLITE_BACKEND") or "numpy"
    if spec == "cupy":
        spec = f"cupy:{os.environ.get('LOCAL_RANK', '0')}"
    return ndlite.get_backend(spec)


def _summed(values: list, backend, dtype: str, op=None) -> list:
    """`values` reduced over the ranks (SUM, or `op`)."""

    t = ndlite.tensor(values, dtype=dtype, backend=backend)
    all_reduce(t, op or ReduceOp.SUM)
    return t.tolist()


def _correct(model, loader) -> tuple[int, int]:
    model.eval()
    correct = count = 0
    with ndlite.no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(dim=1) == y).sum().item())
            count += len(y)
    return correct, count


def _datasets(args, lead: bool):
    """(train, test) MNIST as the arguments ask (only rank 0 downloads); raises MNISTError."""
    if args.subset:
        train_set, test_set = MNIST.bundled(True), MNIST.bundled(False)
    else:
        train_set = MNIST(args.data_dir, train=True, download=args.download and lead)
        test_set = MNIST(args.data_dir, train=False, download=args.download and lead)
    if args.limit is not None:
        train_set.images, train_set.labels = (train_set.images[:args.limit],
                                              train_set.labels[:args.limit])
    return train_set, test_set


def _schedule(args, optimizer):
    if args.lr_schedule == "cosine":
        return ndlite.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    if args.lr_schedule == "step":
        return ndlite.optim.lr_scheduler.StepLR(optimizer, max(args.epochs // 3, 1))
    return None


def _epoch(args, epoch, ddp, optimizer, trainer, loaders, backend, lead) -> dict:
    """One epoch on every rank; the statistics summed over the ranks."""
    train_loader, test_loader = loaders
    world = dist.get_world_size()
    bar = None
    if lead and not args.no_progress:
        bar = tqdm(train_loader, desc=f"epoch {epoch}/{args.epochs}", unit="batch",
                   leave=False, file=sys.stderr)
    start = time.perf_counter()
    stats = trainer.train_epoch(train_loader, bar) if trainer else \
        train_epoch(ddp, train_loader, optimizer, bar)
    if bar is not None:
        bar.close()
    loss_sum, images = _summed([stats["loss"] * stats["images"], stats["images"]],
                               backend, "float64")
    seconds = _summed([time.perf_counter() - start], backend, "float64",
                      dist.ReduceOp.MAX)[0]
    correct, count = _summed(list(_correct(ddp, test_loader)), backend, "int64")
    return {"epoch": epoch, "loss": loss_sum / max(images, 1), "images": int(images),
            "seconds": seconds, "test_accuracy": correct / max(count, 1),
            "images_per_second": images / seconds, "ranks": world}


def _write_outputs(args, model, optimizer, backend, history) -> None:
    if args.save:
        save_checkpoint(model, optimizer, args.epochs, args.save)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": getattr(args, "command_line", "ndlite train mnist"),
                       "ranks": dist.get_world_size(),
                       "engine": dist.get_backend(),
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "args": {k: v for k, v in vars(args).items()
                                if k not in ("run", "command_line")},
                       "backend": backend.name, "device": backend.device_name(),
                       "epochs": history}, f, indent=2)


def _train(args, backend) -> int:
    rank, world = dist.get_rank(), dist.get_world_size()
    lead = rank == 0
    try:
        train_set, test_set = _datasets(args, lead)
    except MNISTError as exc:
        return _fail(str(exc))
    lr = DEFAULT_LR[args.optimizer] if args.lr is None else args.lr
    per_rank = args.batch_size // world
    ndlite.manual_seed(args.seed)
    model = ndlite.nn.models.mnist_cnn().to(backend)
    ddp = DistributedDataParallel(model)
    optimizer = make_optimizer(args.optimizer, ddp.parameters(), lr, args.weight_decay)
    sampler = DistributedSampler(train_set, seed=args.seed)
    loaders = (DataLoader(train_set, per_rank, sampler=sampler,
                          backend="numpy" if args.graph else backend),
               DataLoader(test_set, 1000, sampler=range(rank, len(test_set), world),
                          backend=backend))
    if lead:
        source = "the bundled subset" if args.subset else train_set.root
        print(f"training the seed CNN data-parallel on {world} ranks ({dist.get_backend()}, "
              f"backend {backend.name}) on {len(train_set)} MNIST digits from {source}, "
              f"testing on {len(test_set)}; {args.optimizer} lr {lr}, batch "
              f"{args.batch_size} ({per_rank} per rank)", flush=True)
    schedule = _schedule(args, optimizer)
    trainer = Trainer(ddp, optimizer, F.nll_loss) if args.graph else None
    history = []
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch - 1)
        stats = _epoch(args, epoch, ddp, optimizer, trainer, loaders, backend, lead)
        if schedule is not None:
            stats["lr"] = schedule.get_last_lr()[0]
            schedule.step()
        history.append(stats)
        if lead:
            print(f"epoch {epoch:2d}  train loss {stats['loss']:.4f}  test accuracy "
                  f"{100 * stats['test_accuracy']:.2f}%  epoch time {stats['seconds']:.1f} s  "
                  f"{stats['images_per_second']:.0f} images/s ({world} ranks)", flush=True)
    if lead:
        _write_outputs(args, model, optimizer, backend, history)
    return 0


def train_rank(args) -> int:
    """One rank's training (the process group is made and destroyed here)."""
    backend = _device(args)
    dist.init_process_group("nccl" if backend.kind == "cupy" else "mpi", device=backend
                            if backend.kind == "cupy" else None)
    try:
        return _train(args, backend)
    finally:
        dist.destroy_process_group()


def main() -> int:
    text = os.environ.get(ARGS_VARIABLE)
    if text is None:
        return _fail(f"python -m ndlite.cli.train_parallel runs the ranks of `ndlite train "
                     f"mnist --nproc N`, which sets {ARGS_VARIABLE}; use that command")
    return train_rank(argparse.Namespace(**json.loads(text)))


if __name__ == "__main__":
    sys.exit(main())
