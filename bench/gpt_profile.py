"""Where the character GPT's training step spends its GPU time on a GPU backend: on cupy, CUDA
events around every backend call (the outermost one only); on another backend (--backend
opencl), the wall time of each call with the device synchronized before and after it, which
counts its host time too and serializes the step. Summed per primitive over 3 steps after 3
warm-up steps, with the step's synchronized wall time over 20 steps (issue 14).

    python bench/gpt_profile.py --data ../shared/data/tinyshakespeare/input.txt [--amp bf16]
    python bench/gpt_profile.py --data input.txt --backend opencl
    python bench/gpt_profile.py --model resnet18     # ResNet-18 on 3x32x32, batch 128, SGD
    python bench/gpt_profile.py --model seed_cnn --amp fp16   # the seed CNN, batch 128
    python bench/gpt_profile.py --data input.txt --kernels ndlite   # torch.profiler's kernels
    python bench/gpt_profile.py --model resnet18 --kernels torch    # ... of the PyTorch twin

The model is ndlite.nn.GPT(vocab, 256, 6, 6, 384, dropout 0.2) with AdamW at batch 64; the
table in docs/cuda.md was measured with it on an H100.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (puts ndlite on sys.path)

import ndlite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["gpt", "resnet18", "seed_cnn"], default="gpt")
    parser.add_argument("--data", default=None, help="a text file (tiny shakespeare; gpt)")
    parser.add_argument("--amp", choices=["bf16", "fp16"], default=None,
                        help="the forward under ndlite.autocast in this dtype")
    parser.add_argument("--backend", default="cupy")
    parser.add_argument("--kernels", choices=["ndlite", "torch"], default=None,
                        help="instead: torch.profiler's table of CUDA kernels over 3 steps of "
                             "ndlite's step (every kernel of the process: CuPy's, cuDNN's) or "
                             "of its PyTorch twin (bench/models_torch.py), TF32 off")
    args = parser.parse_args()
    if args.kernels:
        return kernel_table(args)
    b = ndlite.get_backend(args.backend)
    step = {"gpt": gpt_step, "resnet18": resnet_step, "seed_cnn": seed_step}[args.model](b, args)

    for _ in range(3):
        step().item()
    wall, host = common.step_pace(b, step, 20)
    print(f"{b.name}: {1000 * wall:.1f} ms/step (wall), host pace {1000 * host:.1f} ms/step")

    records = []
    clock = Events() if b.kind == "cupy" else Synchronized(b)
    with common.timing_calls(b, clock.start, clock.stop,
                             lambda *reading: records.append(reading)):
        for _ in range(3):
            step()
    b.synchronize()
    total, calls = collections.defaultdict(float), collections.Counter()
    for name, begin, end in records:
        total[name] += clock.ms(begin, end) / 3
        calls[name] += 1
    print(f"{clock.what} ms per step by primitive (sum {sum(total.values()):.1f} ms)")
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{name:24s} {ms:8.2f} ms  {calls[name] // 3:5d} calls")


def gpt_step(b, args):
    data = ndlite.data.CharText.from_file(args.data)
    ndlite.manual_seed(0)
    model = ndlite.nn.GPT(data.vocab_size, 256, 6, 6, 384, 0.2).to(b)
    opt = ndlite.optim.AdamW(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(0)
    low = {"bf16": ndlite.bfloat16, "fp16": ndlite.float16}.get(args.amp)

    def step():
        x, y = data.batch("train", 64, 256, rng, b)
        with ndlite.autocast(dtype=low, enabled=low is not None):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def resnet_step(b, args):
    from models_torch import resnet18_cifar

    ndlite.manual_seed(0)
    return image_step(b, args, resnet18_cifar(ndlite.nn).to(b), (3, 32, 32))


def seed_step(b, args):
    ndlite.manual_seed(0)
    return image_step(b, args, ndlite.nn.models.mnist_cnn().to(b), (1, 28, 28))


def image_step(b, args, model, shape):
    """A training step of an image model at batch 128 (SGD with momentum), data on the device;
    with --amp, the forward under autocast (no gradient scaler: timing only)."""
    opt = ndlite.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = ndlite.tensor(rng.standard_normal((128, *shape), dtype=np.float32), backend=b)
    y = ndlite.tensor(rng.integers(0, 10, 128), backend=b)
    low = {"bf16": ndlite.bfloat16, "fp16": ndlite.float16}.get(args.amp)

    def step():
        with ndlite.autocast(dtype=low, enabled=low is not None):
            loss = ndlite.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def kernel_table(args) -> None:
    """torch.profiler's CUDA kernels over 3 steps after 3 warm-up steps (--kernels)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    if args.kernels == "torch":
        step = torch_step(torch, args)
        sync = torch.cuda.synchronize
    else:
        b = ndlite.get_backend(args.backend)
        step = {"gpt": gpt_step, "resnet18": resnet_step, "seed_cnn": seed_step}[args.model](
            b, args)
        sync = b.synchronize
    for _ in range(3):
        step().item()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        sync()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30,
                                    max_name_column_width=90))


def torch_step(torch, args):
    """The PyTorch twin's step of --model (bench/models_torch.py), batch as ndlite's."""
    from models_torch import TorchGPT, resnet18_cifar

    if args.model == "gpt":
        model = TorchGPT(65, 256, 6, 6, 384, 0.2).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        x = torch.randint(0, 65, (64, 256), device="cuda")
        y = torch.randint(0, 65, (64, 256), device="cuda")
        forward = lambda: model(x, y)[1]  # noqa: E731
    else:
        model = resnet18_cifar(torch.nn).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(128, 3, 32, 32, device="cuda")
        y = torch.randint(0, 10, (128,), device="cuda")
        forward = lambda: torch.nn.functional.cross_entropy(model(x), y)  # noqa: E731

    def step():
        loss = forward()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


class Events:
    """CUDA events: the GPU's time of a call."""
    what = "GPU"

    def __init__(self):
        import cupy

        self.cupy = cupy

    def start(self):
        event = self.cupy.cuda.Event()
        event.record()
        return event

    stop = start

    def ms(self, begin, end) -> float:
        return self.cupy.cuda.get_elapsed_time(begin, end)


class Synchronized:
    """The wall time of a call between two synchronizations: its host and device time."""
    what = "synchronized wall"

    def __init__(self, backend):
        self.backend = backend

    def start(self) -> float:
        self.backend.synchronize()
        return time.perf_counter()

    stop = start

    def ms(self, begin, end) -> float:
        return (end - begin) * 1e3


if __name__ == "__main__":
    main()
