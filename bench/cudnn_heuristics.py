"""The ResNet-18-CIFAR step on the cupy backend under each cuDNN engine ranking and filter:
heuristics mode A or B (`--heur`), and ndlite's note filter or one that also lets FFT and
Winograd engines through as PyTorch does (`--fast`). Prints the step's wall time and host pace
(3 blocks of 20 steps) and torch.profiler's CUDA kernel table over 3 steps, whose total is the
step's GPU time (docs/cuda.md, "Convolution through cuDNN").

    python bench/cudnn_heuristics.py --heur B
    python bench/cudnn_heuristics.py --heur A --fast
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (puts ndlite on sys.path)

import ndlite  # noqa: E402


def patch(heur: str, fast: bool) -> None:
    import cudnn as frontend
    from ndlite_cupy import cudnn as cd

    if fast:
        strict = cd.Convolutions.excluded_notes

        def relaxed(self, dtype, tf32):
            note = self.cudnn.numerical_note
            drop = {note.FFT, note.WINOGRAD} | {getattr(note, f"WINOGRAD_TILE_{t}")
                                                for t in ("4x4", "6x6", "13x13")
                                                if hasattr(note, f"WINOGRAD_TILE_{t}")}
            return [n for n in strict(self, dtype, tf32) if n not in drop]

        cd.Convolutions.excluded_notes = relaxed
    mode = getattr(frontend.heur_mode, heur)
    cd.plan_with_heuristics = lambda cudnn, g: g.create_execution_plans(
        [mode, cudnn.heur_mode.FALLBACK])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heur", choices=["A", "B"], default="B")
    parser.add_argument("--fast", action="store_true", help="FFT and Winograd allowed too")
    args = parser.parse_args()
    patch(args.heur, args.fast)
    from models_torch import resnet18_cifar

    b = ndlite.get_backend("cupy")
    ndlite.manual_seed(0)
    model = resnet18_cifar(ndlite.nn).to(b)
    opt = ndlite.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = ndlite.tensor(rng.standard_normal((128, 3, 32, 32), dtype=np.float32), backend=b)
    y = ndlite.tensor(rng.integers(0, 10, 128), backend=b)

    def step():
        loss = ndlite.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step().item()
    walls = []
    for _ in range(3):
        wall, host = common.step_pace(b, step, 20)
        walls.append(f"{wall * 1e3:.2f}/{host * 1e3:.2f}")
    print(f"resnet18 heuristics {args.heur}{' + FFT/Winograd' if args.fast else ''}: step ms "
          f"(wall/host pace) {walls}; declined {len(b._cudnn.declined)}")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        b.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=22,
                                    max_name_column_width=70))


if __name__ == "__main__":
    main()
