"""Epoch time of the seed CNN on full MNIST (batch 128, RMSprop lr 1e-3): ndlite's OpenCL backend
against PyTorch eager on the same GPU, in one run, on the same batches (same images, same
order), each step from host batches to `loss.item()` as `ndlite train` does.

Both warm up first (kernel builds, cuDNN's first calls); then epochs alternate (ndlite, torch,
ndlite, torch) and the best epoch of each is compared. TF32 is off in PyTorch as in ndlite (true
float32 arithmetic on both sides). With --profile-steps N, N more steps run on a second OpenCL
queue with profiling on, to split a step into kernel time on the GPU and time on the host.

    python bench/opencl_train.py --data-dir .carry/mnist --json out.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import timed_steps, torch_seed_cnn, with_machine  # noqa: E402


def batches_of(data, limit: int | None, size: int = 128) -> list:
    n = len(data) if limit is None else min(limit, len(data))
    order = np.random.default_rng(0).permutation(len(data))[:n]
    return [data.batch(order[i:i + size]) for i in range(0, n, size)]


def ndlite_state(backend):
    import ndlite

    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(backend)
    return model, ndlite.optim.RMSprop(model.parameters(), lr=1e-3)


def ndlite_steps(batches, backend, state) -> float:
    import ndlite
    from ndlite.nn import functional as F

    model, opt = state
    return timed_steps(batches, model, opt, F.nll_loss,
                       lambda a: ndlite.tensor(a, backend=backend))


def torch_state():
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = torch_seed_cnn().cuda()
    return model, torch.optim.RMSprop(model.parameters(), lr=1e-3)


def torch_steps(batches, state) -> float:
    import torch
    from torch.nn import functional as F

    model, opt = state
    return timed_steps(batches, model, opt, F.nll_loss, lambda a: torch.from_numpy(a).cuda())


def profile_steps(batches, spec: str) -> dict:
    """Kernel time per step from profiling events on a queue of its own, and the host's wall
    time over the same steps: which of the two bounds a step."""
    from ndlite_opencl import OpenCLBackend

    os.environ["NDLITE_OPENCL_PROFILE"] = "1"
    backend = OpenCLBackend(spec.partition(":")[2] or None)
    state = ndlite_state(backend)
    ndlite_steps(batches[:3], backend, state)  # build this context's kernels
    events = []
    enqueue = backend.enqueue

    def recording(kernel, *args, **kwargs):
        event = enqueue(kernel, *args, **kwargs)
        events.append((kernel.function_name, event))
        return event

    backend.enqueue = recording
    blocked = [0.0]  # seconds the host spent waiting in blocking transfers

    def timed(fn):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                blocked[0] += time.perf_counter() - started
        return wrapper

    backend.to_numpy, backend.from_numpy = timed(backend.to_numpy), timed(backend.from_numpy)
    seconds = ndlite_steps(batches, backend, state)
    backend.synchronize()
    per_kernel = collections.defaultdict(float)
    for name, event in events:
        per_kernel[name] += (event.profile.end - event.profile.start) * 1e-9
    steps = len(batches)
    gpu = sum(per_kernel.values())
    return {"steps": steps, "launches_per_step": len(events) / steps,
            "wall_ms_per_step": 1e3 * seconds / steps, "kernel_ms_per_step": 1e3 * gpu / steps,
            "blocked_ms_per_step": 1e3 * blocked[0] / steps,
            "kernel_ms_per_step_by_kernel": {k: 1e3 * v / steps for k, v in
                                             sorted(per_kernel.items(), key=lambda kv: -kv[1])}}


def host_profile(batches, backend, state, top: int = 30) -> str:
    """Where the host's time goes in a step: cProfile's functions by their own time."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    ndlite_steps(batches, backend, state)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    print(text.getvalue())
    return text.getvalue()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--backend", default="opencl:gpu")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--limit", type=int, default=None, help="first N training digits only")
    p.add_argument("--profile-steps", type=int, default=50)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--host-profile", type=int, default=0, metavar="STEPS",
                   help="also print cProfile's top functions over STEPS steps")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)

    import ndlite
    from ndlite.data import MNIST

    backend = ndlite.get_backend(args.backend)
    batches = batches_of(MNIST(args.data_dir), args.limit)
    images = sum(len(y) for _, y in batches)
    runs = {"ndlite opencl": (lambda s: ndlite_steps(batches, backend, s),
                              ndlite_state(backend))}
    if not args.no_torch:
        import torch

        runs["torch eager"] = (lambda s: torch_steps(batches, s), torch_state())
        torch_version = torch.__version__
    print(f"seed CNN, one epoch of {images} MNIST digits, batch 128, RMSprop, on "
          f"{backend.device_name()} ({backend.name})", flush=True)
    for name, (_, state) in runs.items():  # warm-up: builds, first calls
        if name == "ndlite opencl":
            ndlite_steps(batches[:20], backend, state)
        else:
            torch_steps(batches[:20], state)
    times: dict[str, list] = {name: [] for name in runs}
    for r in range(args.repeats):
        for name, (epoch, state) in runs.items():
            seconds = epoch(state)
            times[name].append(seconds)
            print(f"  repeat {r + 1}: {name:13s} {seconds:7.2f} s  {images / seconds:8.0f} "
                  f"images/s", flush=True)
    best = {name: min(ts) for name, ts in times.items()}
    report = {"what": "seed CNN epoch, full MNIST, batch 128, RMSprop lr 1e-3",
              "device": backend.device_name(), "backend": backend.name, "images": images,
              "epoch_seconds": times, "best_epoch_seconds": best,
              "host": platform.node(), "python": platform.python_version(),
              "numpy": np.__version__, "opencl": backend.info()}
    if "torch eager" in best:
        report["torch"] = torch_version
        report["ratio_opencl_over_torch"] = best["ndlite opencl"] / best["torch eager"]
        print(f"best epoch: ndlite OpenCL {best['ndlite opencl']:.2f} s, torch eager "
              f"{best['torch eager']:.2f} s: ratio {report['ratio_opencl_over_torch']:.2f} "
              f"(target <= 1.5)")
    if args.profile_steps:
        prof = profile_steps(batches[:args.profile_steps], args.backend)
        report["profile"] = prof
        top = ", ".join(f"{k} {v:.3f}" for k, v in
                        list(prof["kernel_ms_per_step_by_kernel"].items())[:6])
        print(f"per step ({prof['steps']} steps, profiling queue): wall "
              f"{prof['wall_ms_per_step']:.2f} ms, of which waiting in transfers "
              f"{prof['blocked_ms_per_step']:.2f} ms; kernels {prof['kernel_ms_per_step']:.2f} ms "
              f"in {prof['launches_per_step']:.0f} launches ({top} ms)")
    if args.host_profile:
        report["host_profile"] = host_profile(batches[:args.host_profile], backend,
                                              runs["ndlite opencl"][1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(with_machine(report), f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
