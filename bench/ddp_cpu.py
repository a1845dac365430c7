"""Data-parallel training on CPUs: images/s of the seed CNN on 2 MPI ranks (DDP, one thread
each) against 1 process at the same per-rank batch, with one thread and with every core.

    python bench/ddp_cpu.py [--batch 128] [--steps 40] [--repeats 3] [--out ddp_cpu]

Each configuration runs in fresh processes (`--worker`): training steps on random
MNIST-shaped batches, RMSprop, after 5 warm-up steps; the ranks are started by
`python -m ndlite.distributed.run --engine mpi`. Images/s counts the images of every rank over
the slowest rank's time; the best of `--repeats` runs (interleaved) is kept. The ranks also time an
all-reduce of the model's gradient size (what DDP adds to a step).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import cpu_name, save, timed_steps  # noqa: E402

WARMUP = 5


def worker(batch: int, steps: int) -> None:
    import numpy as np

    import ndlite
    import ndlite.distributed as dist
    from ndlite.nn import functional as F
    from ndlite.nn.parallel import DistributedDataParallel

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("mpi")
    rank = dist.get_rank() if world > 1 else 0
    rng = np.random.default_rng(rank)
    batches = [(rng.standard_normal((batch, 1, 28, 28), dtype=np.float32),
                rng.integers(0, 10, batch)) for _ in range(WARMUP + steps)]
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn()
    net = DistributedDataParallel(model) if world > 1 else model
    opt = ndlite.optim.RMSprop(net.parameters(), lr=1e-3)
    times = [timed_steps([b], net, opt, F.nll_loss, ndlite.tensor) for b in batches]
    seconds = sum(times[WARMUP:])
    result = {"world": world, "batch_per_rank": batch, "steps": steps}
    if world > 1:
        slowest = ndlite.tensor([seconds], dtype="float64")
        dist.all_reduce(slowest, dist.ReduceOp.MAX)
        seconds = slowest.item()
        grads = ndlite.zeros(sum(p.numel() for p in model.parameters()))
        dist.barrier()
        start = time.perf_counter()
        for _ in range(50):
            dist.all_reduce(grads)
        result["allreduce_ms"] = (time.perf_counter() - start) / 50 * 1e3
        result["allreduce_elements"] = grads.numel()
    result.update(seconds=seconds, images_per_second=world * batch * steps / seconds,
                  step_ms=seconds / steps * 1e3)
    if rank == 0:
        sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    if world > 1:
        dist.destroy_process_group()


def measure(ranks: int, threads: int, batch: int, steps: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    worker_args = [str(HERE / "ddp_cpu.py"), "--worker", "--batch", str(batch), "--steps",
                   str(steps)]
    if ranks == 1:
        command = [sys.executable, *worker_args]
    else:
        command = [sys.executable, "-m", "ndlite.distributed.run", "--nproc-per-node",
                   str(ranks), "--engine", "mpi", *worker_args]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{out.stderr}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def lscpu() -> dict:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return {}
    wanted = ("Model name", "CPU family", "Model", "CPU(s)", "Thread(s) per core",
              "Hypervisor vendor")
    rows = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in rows if k.strip() in wanted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128, help="images per rank per step")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="ddp_cpu")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.batch, args.steps)
        return

    cores = os.cpu_count() or 1
    configs = [("1 process, 1 thread", 1, 1), (f"1 process, {cores} threads", 1, cores),
               (f"2 ranks x {max(cores // 2, 1)} thread(s), DDP over MPI", 2,
                max(cores // 2, 1))]
    print(f"seed CNN training steps on {cpu_name()} ({cores} cores), batch {args.batch} per "
          f"rank, {args.steps} steps, best of {args.repeats}")
    runs: dict = {name: [] for name, _, _ in configs}
    for _ in range(args.repeats):  # interleaved, so that a busy spell hits every config
        for name, ranks, threads in configs:
            runs[name].append(measure(ranks, threads, args.batch, args.steps))
    results = {}
    for name, ranks, threads in configs:
        best = max(runs[name], key=lambda r: r["images_per_second"])
        results[name] = {"ranks": ranks, "threads_per_rank": threads, "best": best,
                         "images_per_second_runs": [r["images_per_second"] for r in runs[name]]}
        extra = (f", all-reduce of {best['allreduce_elements']:,} floats "
                 f"{best['allreduce_ms']:.2f} ms" if "allreduce_ms" in best else "")
        print(f"  {name:40s} {best['images_per_second']:7.0f} images/s  "
              f"(step {best['step_ms']:.1f} ms{extra})", flush=True)
    names = [name for name, _, _ in configs]
    two = results[names[2]]["best"]["images_per_second"]
    ratios = {f"2 ranks / {names[0]}": two / results[names[0]]["best"]["images_per_second"],
              f"2 ranks / {names[1]}": two / results[names[1]]["best"]["images_per_second"]}
    for label, ratio in ratios.items():
        print(f"  {label}: {ratio:.2f}x")
    path = save(args.out, {"lscpu": lscpu(), "load_average": os.getloadavg(),
                           "batch_per_rank": args.batch, "steps": args.steps,
                           "results": results, "ratios": ratios})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
