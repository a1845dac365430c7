"""Half precision on one GPU (issue 16): ndlite's CuPy backend against PyTorch, one run.

    python bench/half_gpu.py [--out half_gpu]

- matmul: (n, n) @ (n, n) for n = 4096 and 8192 in bfloat16 and float16 (fp32 accumulation
  on tensor cores on both sides), median of CUDA-event timings of 20 back-to-back products;
- char_gpt: the training step of ndlite.nn.GPT (6 x 384, context 256, batch 64, dropout 0.2,
  AdamW) in float32 and under bf16 autocast, against the same model in PyTorch with and
  without torch.autocast(bfloat16), TF32 off; steps alternate between the sides in blocks;
- seed_cnn: the seed CNN's training step (batch 128, Adam) in float32 and under fp16 autocast
  with a GradScaler, ndlite against PyTorch.
Writes bench/results/<out>.json (machine, versions, every median).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save, torch_seed_cnn  # noqa: E402  (common puts ndlite on sys.path)
from models_torch import TorchGPT, copy_weights  # noqa: E402

import ndlite  # noqa: E402
from ndlite.benchmark import machine_info  # noqa: E402


def events_ms(fn, repeat: int, number: int, sync) -> float:
    """Median over `repeat` blocks of the mean ms of `number` calls, on CUDA events."""
    import cupy

    times = []
    for _ in range(repeat):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        sync()
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / number)
    return statistics.median(times)


def matmul_rows(torch, backend) -> list[dict]:
    rows = []
    for n in (4096, 8192):
        for name in ("bfloat16", "float16"):
            a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
            x = ndlite.tensor(a, backend=backend).to(getattr(ndlite, name))
            t = torch.tensor(a, device="cuda").to(getattr(torch, name))
            for _ in range(3):
                x @ x, t @ t
            ours = events_ms(lambda x=x: x @ x, 7, 20, backend.synchronize)
            theirs = events_ms(lambda t=t: t @ t, 7, 20, torch.cuda.synchronize)
            rows.append({"workload": f"matmul_{n}_{name}", "ndlite_ms": ours, "torch_ms": theirs,
                         "ratio": ours / theirs, "tflops": 2 * n**3 / ours / 1e9,
                         "torch_tflops": 2 * n**3 / theirs / 1e9})
            print(f"matmul {n}^3 {name}: ndlite {ours:.3f} ms ({rows[-1]['tflops']:.0f} TFLOP/s), "
                  f"torch {theirs:.3f} ms: ratio {ours / theirs:.2f}x", flush=True)
    return rows


def _gpt_steps(torch, backend):
    """The step functions: ndlite fp32, ndlite bf16 autocast, torch fp32, torch autocast."""
    ndlite.manual_seed(0)
    model = ndlite.nn.GPT(65, 256, 6, 6, 384, 0.2).to(backend)
    twin = TorchGPT(65, 256, 6, 6, 384, 0.2).cuda()
    copy_weights(model, twin)
    ours = ndlite.optim.AdamW(model.parameters(), lr=3e-4)
    theirs = torch.optim.AdamW(twin.parameters(), lr=3e-4)
    r = np.random.default_rng(0)
    ids = r.integers(0, 65, (64, 257))
    x, y = (ndlite.tensor(a, backend=backend) for a in (ids[:, :-1], ids[:, 1:]))
    tx, ty = (torch.tensor(a, device="cuda") for a in (ids[:, :-1], ids[:, 1:]))

    def nd(amp):
        def step():
            with ndlite.amp.autocast("cuda", dtype=ndlite.bfloat16, enabled=amp):
                _, loss = model(x, y)
            ours.zero_grad(set_to_none=True)
            loss.backward()
            ours.step()
        return step

    def th(amp):
        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                _, loss = twin(tx, ty)
            theirs.zero_grad(set_to_none=True)
            loss.backward()
            theirs.step()
        return step

    return {"ndlite_fp32": nd(False), "ndlite_bf16": nd(True), "torch_fp32": th(False),
            "torch_bf16": th(True)}


def _cnn_steps(torch, backend):
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(backend)
    twin = torch_seed_cnn().cuda()
    copy_weights(model, twin)
    ours, theirs = ndlite.optim.Adam(model.parameters()), torch.optim.Adam(twin.parameters())
    scaler, tscaler = ndlite.amp.GradScaler(), torch.amp.GradScaler("cuda")
    r = np.random.default_rng(0)
    images = r.standard_normal((128, 1, 28, 28)).astype(np.float32)
    labels = r.integers(0, 10, 128)
    x, y = ndlite.tensor(images, backend=backend), ndlite.tensor(labels, backend=backend)
    tx, ty = torch.tensor(images, device="cuda"), torch.tensor(labels, device="cuda")

    def nd(amp):
        def step():
            ours.zero_grad()
            with ndlite.amp.autocast("cuda", dtype=ndlite.float16, enabled=amp):
                loss = ndlite.nn.functional.nll_loss(model(x), y)
            if amp:
                scaler.scale(loss).backward()
                scaler.step(ours)
                scaler.update()
            else:
                loss.backward()
                ours.step()
        return step

    def th(amp):
        def step():
            theirs.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                loss = torch.nn.functional.nll_loss(twin(tx), ty)
            if amp:
                tscaler.scale(loss).backward()
                tscaler.step(theirs)
                tscaler.update()
            else:
                loss.backward()
                theirs.step()
        return step

    return {"ndlite_fp32": nd(False), "ndlite_fp16": nd(True), "torch_fp32": th(False),
            "torch_fp16": th(True)}


def step_rows(name: str, steps: dict, backend, torch, rounds: int, number: int) -> list[dict]:
    """Each step function timed in alternating blocks; medians per step."""
    for fn in steps.values():
        for _ in range(3):
            fn()
    times = {k: [] for k in steps}
    for _ in range(rounds):
        for key, fn in steps.items():
            sync = torch.cuda.synchronize if key.startswith("torch") else backend.synchronize
            times[key].append(events_ms(fn, 1, number, sync))
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(f"{name}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in medians.items()), flush=True)
    return [{"workload": name, **{f"{k}_ms": v for k, v in medians.items()}}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="half_gpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    backend = ndlite.get_backend("cupy")
    rows = matmul_rows(torch, backend)
    rows += step_rows("char_gpt", _gpt_steps(torch, backend), backend, torch,
                      args.rounds, args.steps)
    rows += step_rows("seed_cnn_step", _cnn_steps(torch, backend), backend, torch,
                      args.rounds, 4 * args.steps)
    gpt = rows[-2]
    gpt["bf16_speedup_over_fp32"] = gpt["ndlite_fp32_ms"] / gpt["ndlite_bf16_ms"]
    gpt["bf16_ratio_to_torch_autocast"] = gpt["ndlite_bf16_ms"] / gpt["torch_bf16_ms"]
    print(f"char_gpt bf16 autocast: {gpt['bf16_speedup_over_fp32']:.2f}x faster than ndlite "
          f"fp32, {gpt['bf16_ratio_to_torch_autocast']:.2f}x PyTorch's autocast step")
    info = machine_info([backend])
    info["torch"] = torch.__version__
    print(f"wrote {save(args.out, {'machine': info, 'rows': rows})}")


if __name__ == "__main__":
    main()
