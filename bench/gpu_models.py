"""ndlite against PyTorch on one GPU, three models, one command, one run (issues 14 and 15):

- seed_cnn: one epoch of the seed CNN (ndlite.nn.models.mnist_cnn, RMSprop lr 1e-3, batch 128)
  over MNIST (--mnist-dir, else the bundled 6000-image subset, said in the row), every step
  from host batches to loss.item() as bench/cupy_train.py and `ndlite train` do;
- seed_cnn_graph (cupy only): the same epoch with ndlite's step recorded once as a CUDA graph
  (ndlite.cuda.capture) and replayed for every full batch, against PyTorch's eager epoch;
- resnet18_cifar: a training step of ResNet-18 for 3x32x32 inputs (bench/models_torch.py),
  batch 128, SGD lr 0.01 momentum 0.9, cross-entropy, random data already on the device;
- char_gpt: a training step of ndlite.nn.GPT(vocab 65, block 256, 6 layers, 6 heads, width 384,
  dropout 0.2), AdamW lr 3e-4, batch 64, random token windows already on the device.

Named with --workloads only (issue 15's other shapes, so that a gain shows to be general):
- vgg_cifar: a step of a VGG-style net (3x32x32, 64-128-256 channels, two 3x3 convs with
  BatchNorm and ReLU per width, max-pool), batch 128, SGD lr 0.01 momentum 0.9, cross-entropy;
- mlp_wide: a step of an MLP 1024-4096-4096-4096-10, batch 1024, Adam lr 1e-3, cross-entropy;
- mlp_small: a step of an MLP 32-64-64-10, batch 32, Adam lr 1e-3 (launch-bound).

    python bench/gpu_models.py [--backends cupy opencl] [--workloads ...] [--mnist-dir D]
    python bench/gpu_models.py --cpu --steps 2 --warmup 1 --batch-scale 0.05 --out /tmp/gm.json

Both sides start from the same weights (ndlite's, copied into the torch twin), and before
timing each row checks that they compute the same model: loss and gradients on one batch (the
GPT with dropout off), the differences printed and kept in the row. Then each side warms up
(--warmup steps), and blocks alternate, ndlite, torch, ndlite, torch (--rounds each; a block is
--steps steps, or one epoch for seed_cnn); a row's figure is the median block, per step (per
epoch for seed_cnn). Timers: CUDA events for torch and for ndlite's cupy backend (the GPU's
timeline; a launch-bound side measures the host's pace), wall time after synchronize for
ndlite's opencl backend and in --cpu mode. PyTorch runs with TF32 off (as ndlite) and its
defaults otherwise: cudnn.benchmark stays False, attention is F.scaled_dot_product_attention.

--cpu: ndlite's numpy backend (or --backends) against torch on the CPU, at --batch-scale times
the batches, to test this script without a GPU; it writes only to --out (required), never to
bench/results.
A run missing a backend or PyTorch goes to <out>.partial.json, saying why (bench/common.py).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save, torch_seed_cnn  # noqa: E402  (common puts ndlite on sys.path)
from models_torch import (  # noqa: E402
    TorchGPT,
    copy_weights,
    mlp,
    resnet18_cifar,
    same_model,
    vgg_cifar,
)

import ndlite  # noqa: E402
from ndlite.benchmark import machine_info  # noqa: E402
from ndlite.device.registry import probe  # noqa: E402

WORKLOADS = ("seed_cnn", "seed_cnn_graph", "resnet18_cifar", "char_gpt")
#: run when named: the issue's other shapes
EXTRA = ("vgg_cifar", "mlp_wide", "mlp_small")
BATCH = {"seed_cnn": 128, "seed_cnn_graph": 128, "resnet18_cifar": 128, "char_gpt": 64,
         "vgg_cifar": 128, "mlp_wide": 1024, "mlp_small": 32}
#: the MLPs' layer sizes (in, hidden..., classes)
MLP = {"mlp_wide": (1024, 4096, 4096, 4096, 10), "mlp_small": (32, 64, 64, 10)}
#: workloads timed per epoch of host batches (the others per step on device batches)
EPOCHS = ("seed_cnn", "seed_cnn_graph")
GPT = {"vocab_size": 65, "block_size": 256, "n_layer": 6, "n_head": 6, "n_embd": 384,
       "dropout": 0.2}
OPTIMIZER = {"seed_cnn": "RMSprop lr 1e-3", "seed_cnn_graph": "RMSprop lr 1e-3",
             "resnet18_cifar": "SGD lr 0.01 momentum 0.9",
             "char_gpt": "AdamW lr 3e-4 (weight_decay 0.01)",
             "vgg_cifar": "SGD lr 0.01 momentum 0.9", "mlp_wide": "Adam lr 1e-3",
             "mlp_small": "Adam lr 1e-3"}


# ---- the two sides of a row ------------------------------------------------------------------


class Side:
    """One framework's model, optimizer and batches, and how to time a block of its steps."""

    def __init__(self, fw, nn, optim, where, workload: str, host_batches, batch: int):
        self.fw, self.workload, self.batch = fw, workload, batch
        self.is_torch = fw.__name__ == "torch"
        self.where = where  # an ndlite backend, or a torch device string
        self.functional = nn.functional
        fw.manual_seed(0)
        if workload in EPOCHS:
            self.model = torch_seed_cnn() if self.is_torch else ndlite.nn.models.mnist_cnn()
        elif workload == "resnet18_cifar":
            self.model = resnet18_cifar(nn)
        elif workload == "vgg_cifar":
            self.model = vgg_cifar(nn)
        elif workload in MLP:
            self.model = mlp(nn, MLP[workload])
        else:
            self.model = TorchGPT(**GPT) if self.is_torch else ndlite.nn.GPT(**GPT)
        self.model.to(where)
        params = self.model.parameters()
        self.opt = (optim.RMSprop(params, lr=1e-3) if workload in EPOCHS else
                    optim.SGD(params, lr=0.01, momentum=0.9)
                    if workload in ("resnet18_cifar", "vgg_cifar") else
                    optim.Adam(params, lr=1e-3) if workload in MLP
                    else optim.AdamW(params, lr=3e-4))
        self.host_batches = host_batches
        # seed_cnn copies each host batch in its step; the others step on device batches
        self.device_batches = [] if workload in EPOCHS else \
            [(self.to(x), self.to(y)) for x, y in host_batches]
        self.graph = None  # seed_cnn_graph: the recorded step, made at the first full batch

    def to(self, array):
        if self.is_torch:
            return self.fw.from_numpy(array).to(self.where)
        return ndlite.tensor(array, backend=self.where)

    def loss(self, x, y):
        F = self.functional
        if self.workload in EPOCHS:
            return F.nll_loss(self.model(x), y)
        if self.workload == "char_gpt":
            return self.model(x, y)[1]
        return F.cross_entropy(self.model(x), y)

    def step(self, x, y):
        self.opt.zero_grad()
        loss = self.loss(x, y)
        loss.backward()
        self.opt.step()
        return loss

    def steps(self, n: int) -> None:
        """n training steps; seed_cnn: each from a host batch to loss.item() (n=0: an epoch)."""
        if self.workload == "seed_cnn_graph" and not self.is_torch:
            for x, y in self.host_batches[:n or None]:
                if len(y) != self.batch:  # the short last batch: eager, as `ndlite train`
                    self.step(self.to(x), self.to(y)).item()
                elif self.graph is None:  # records after one eager warm-up step on (x, y)
                    self.graph = ndlite.cuda.capture(self.step, x, y, optimizers=[self.opt])
                    self.graph(x, y).item()
                else:
                    self.graph(x, y).item()
            return
        if self.workload in EPOCHS:
            for x, y in self.host_batches[:n or None]:
                self.step(self.to(x), self.to(y)).item()
            return
        for i in range(n):
            self.step(*self.device_batches[i % len(self.device_batches)])

    def sync(self) -> None:
        if self.is_torch:
            if self.where != "cpu":
                self.fw.cuda.synchronize()
        else:
            self.where.synchronize()

    @property
    def timer(self) -> str:
        if self.is_torch:
            return "wall" if self.where == "cpu" else "cuda events (torch)"
        return "cuda events (cupy)" if self.where.kind == "cupy" else "wall"

    def block_ms(self, n: int) -> tuple[float, float]:
        """(timer ms, wall ms) of `steps(n)`, from a synchronized start to the end of its work."""
        events = None
        if self.timer.startswith("cuda events"):
            if self.is_torch:
                events = [self.fw.cuda.Event(enable_timing=True) for _ in range(2)]
            else:
                import cupy

                events = [cupy.cuda.Event(), cupy.cuda.Event()]
        self.sync()
        wall = time.perf_counter()
        if events:
            events[0].record()
        self.steps(n)
        if events:
            events[1].record()
        self.sync()
        wall = (time.perf_counter() - wall) * 1e3
        if not events:
            return wall, wall
        if self.is_torch:
            return events[0].elapsed_time(events[1]), wall
        import cupy

        return cupy.cuda.get_elapsed_time(*events), wall

    def device_name(self) -> str:
        if self.is_torch:
            return "cpu" if self.where == "cpu" else self.fw.cuda.get_device_name()
        return self.where.device_name()


# ---- data --------------------------------------------------------------------------------------


def host_batches(workload: str, batch: int, args) -> tuple[list, str]:
    """The host batches of a workload and a line saying where they come from."""
    rng = np.random.default_rng(0)
    if workload in EPOCHS:
        from ndlite.data import MNIST

        data, source = None, ""
        if args.mnist_dir:
            try:
                data, source = MNIST(args.mnist_dir), f"MNIST train from {args.mnist_dir}"
            except Exception as exc:  # noqa: BLE001 - fall back, and say why in the row
                source = f"--mnist-dir {args.mnist_dir} unusable ({type(exc).__name__}: {exc}); "
        if data is None:
            data = MNIST.bundled()
            source += (f"bundled MNIST subset ({len(data)} images; no --mnist-dir given)"
                       if not args.mnist_dir else f"bundled MNIST subset ({len(data)} images)")
        limit = args.limit or (8 * batch if args.cpu else None)
        n = len(data) if limit is None else min(limit, len(data))
        order = rng.permutation(len(data))[:n]
        return [data.batch(order[i:i + batch]) for i in range(0, n, batch)], source
    if workload in ("resnet18_cifar", "vgg_cifar"):
        return [(rng.standard_normal((batch, 3, 32, 32), dtype=np.float32),
                 rng.integers(0, 10, batch)) for _ in range(4)], "random 3x32x32, 10 classes"
    if workload in MLP:
        features = MLP[workload][0]
        return [(rng.standard_normal((batch, features), dtype=np.float32),
                 rng.integers(0, 10, batch)) for _ in range(4)], \
            f"random {features} features, 10 classes"
    windows = rng.integers(0, GPT["vocab_size"], (4, batch, GPT["block_size"] + 1))
    return [(w[:, :-1].copy(), w[:, 1:].copy()) for w in windows], \
        f"random token windows of {GPT['block_size']} (+1 target shift), vocab 65"


# ---- a row: one workload on one backend, the two sides alternating ---------------------------


def run_row(workload: str, backend, torch, args, missing: dict) -> dict:
    batch = max(2, round(BATCH[workload] * args.batch_scale))
    batches, source = host_batches(workload, batch, args)
    ours = Side(ndlite, ndlite.nn, ndlite.optim, backend, workload, batches, batch)
    theirs = None
    if torch is not None:
        theirs = Side(torch, torch.nn, torch.optim, "cpu" if args.cpu else "cuda", workload,
                      batches, batch)
        copy_weights(ours.model, theirs.model)
    name = f"{workload} on {backend.name}"
    row = {"workload": workload, "backend": backend.kind, "backend_name": backend.name,
           "device": ours.device_name(),
           "torch_device": theirs.device_name() if theirs else None, "batch": batch,
           "optimizer": OPTIMIZER[workload], "data": source,
           "unit": "epoch" if workload in EPOCHS else "step"}
    if theirs is not None:
        row["check"] = check = same_model(ours, theirs)
        for dtype, c in check.items():
            if isinstance(c, dict):
                print(f"{name}: {dtype}: loss ndlite {c['loss_ndlite']:.8f} torch "
                      f"{c['loss_torch']:.8f} (|diff| {c['max_abs_loss_diff']:.1e}), gradients "
                      f"max rel diff {c['max_grad_rel_diff']:.1e} over {c['tensors']} tensors")
        print(f"{name}: same model: {'yes' if check['same'] else 'NO'}", flush=True)
        if not check["same"]:
            missing[f"{name}: same model"] = "ndlite and its torch mirror disagree (see check)"
    sides = [s for s in (ours, theirs) if s is not None]
    for side in sides:
        side.steps(args.warmup)
        if workload in EPOCHS and len(batches[-1][1]) != batch:  # the short last batch
            side.step(side.to(batches[-1][0]), side.to(batches[-1][1])).item()
    per_block = 0 if workload in EPOCHS else args.steps
    units = 1 if workload in EPOCHS else args.steps
    samples = {"ndlite": [], "torch": []}
    walls = {"ndlite": [], "torch": []}
    for _ in range(args.rounds):
        for label, side in zip(("ndlite", "torch"), sides):
            ms, wall = side.block_ms(per_block)
            samples[label].append(ms / units)
            walls[label].append(wall / units)
    medians = {k: statistics.median(v) if v else None for k, v in samples.items()}
    row.update(ndlite_ms=medians["ndlite"], torch_ms=medians["torch"],
               ratio=medians["ndlite"] / medians["torch"] if theirs else None,
               timer={"ndlite": ours.timer, "torch": theirs.timer if theirs else None},
               samples_ms=samples, samples_n={k: len(v) for k, v in samples.items()},
               median_ms=medians, wall_median_ms={k: statistics.median(v) if v else None
                                                  for k, v in walls.items()},
               steps_per_block=units if workload not in EPOCHS else len(batches),
               warmup_steps=args.warmup)
    if workload in EPOCHS:
        row["images"] = sum(len(y) for _, y in batches)
        row["step_ms"] = {k: v / len(batches) if v else None for k, v in medians.items()}
    ratio = f"{row['ratio']:.2f}x" if row["ratio"] else "n/a"
    torch_ms = f"{row['torch_ms']:.2f}" if row["torch_ms"] else "n/a"
    print(f"{name}: ndlite {row['ndlite_ms']:.2f} ms/{row['unit']}, torch {torch_ms} "
          f"ms/{row['unit']}: ratio {ratio} (medians of {args.rounds} alternating blocks)",
          flush=True)
    return row


def free_memory(torch) -> None:
    gc.collect()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
    if "cupy" in sys.modules:
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()


# ---- setup and main ----------------------------------------------------------------------------


def load_torch(cpu: bool):
    """PyTorch with TF32 off and its defaults otherwise (cudnn.benchmark False), or (None, why)."""
    try:
        import torch
    except ImportError as exc:
        return None, f"PyTorch is not installed ({exc})"
    if not cpu and not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no CUDA device"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch, ""


def machine(backends, torch) -> dict:
    info = machine_info(backends)
    for lib in ("torch", "cupy", "pyopencl"):
        info[lib] = info["versions"].get(lib, "not installed")
    for dist in ("cupy-cuda13x", "cupy-cuda12x"):
        try:
            info["cupy"] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    if torch is not None:
        info["torch_settings"] = {
            "allow_tf32 (matmul)": torch.backends.cuda.matmul.allow_tf32,
            "allow_tf32 (cudnn)": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cudnn.benchmark": torch.backends.cudnn.benchmark, "threads": torch.get_num_threads()}
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name()
            info["cudnn"] = torch.backends.cudnn.version()
            info["cuda (torch)"] = torch.version.cuda
    return info


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS + EXTRA,
                        default=list(WORKLOADS), help=f"default: {' '.join(WORKLOADS)}")
    parser.add_argument("--backends", nargs="+", choices=["cupy", "opencl", "numpy"],
                        default=None, help="ndlite's backends (default cupy opencl; numpy "
                                           "with --cpu)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per block")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps before timing")
    parser.add_argument("--rounds", type=int, default=None,
                        help="blocks per side, alternating (default 5; 2 with --cpu)")
    parser.add_argument("--mnist-dir", default=None)
    parser.add_argument("--limit", type=int, default=None,
                        help="seed_cnn: images in the epoch (default all; 8 batches with --cpu)")
    parser.add_argument("--batch-scale", type=float, default=1.0)
    parser.add_argument("--cpu", action="store_true",
                        help="ndlite's numpy backend against torch on the CPU (a test run)")
    parser.add_argument("--out", default=None,
                        help="result name or path (default bench/results/gpu_models.json)")
    args = parser.parse_args(argv)
    if args.cpu and not args.out:
        parser.error("--cpu needs --out: a test run never writes to bench/results")
    args.rounds = args.rounds or (2 if args.cpu else 5)
    args.backends = args.backends or (["numpy"] if args.cpu else ["cupy", "opencl"])
    return args


def main(argv=None) -> int:
    args = parse(argv)
    torch, why = load_torch(args.cpu)
    missing = {} if torch is not None else {"torch": why}
    backends = []
    for name in args.backends:
        backend, reason = probe(name)
        if backend is None:
            missing[f"backend {name}"] = reason
            print(f"skipping backend {name}: {reason}", flush=True)
        else:
            backends.append(backend)
    where = "torch on the CPU" if args.cpu else "torch on CUDA (TF32 off, cudnn.benchmark False)"
    print(f"ndlite on {', '.join(b.name for b in backends) or 'no backend'} against {where}; "
          f"{args.rounds} alternating blocks of {args.steps} steps (seed_cnn: of an epoch) "
          f"after {args.warmup} warm-up steps, batch scale {args.batch_scale}", flush=True)
    rows = []
    for workload in args.workloads:
        for backend in backends:
            if workload == "seed_cnn_graph" and backend.kind != "cupy":
                continue  # CUDA graphs: the cupy backend only
            rows.append(run_row(workload, backend, torch, args, missing))
            free_memory(torch)
    out = str(Path(args.out).absolute()) if args.cpu else (args.out or "gpu_models")
    payload = {"machine": machine(backends, torch), "command": " ".join(["python", *sys.argv]),
               "mode": "cpu (numpy backend vs torch CPU)" if args.cpu else "gpu",
               "settings": {"steps_per_block": args.steps, "warmup": args.warmup,
                            "rounds": args.rounds, "batch_scale": args.batch_scale,
                            "gpt": GPT},
               "rows": rows}
    print(f"wrote {save(out, payload, missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
