"""The seed CNN's step replayed from a CUDA graph (ndlite.cuda.capture) on the CuPy backend:
the wall time a replay takes from a host batch to `loss.item()`, and the GPU time of the graph
alone (launched back to back, timed by CUDA events): their difference is the host's share of a
replay (copying the batch in, the optimizers' Python side, the launch, the read back).

    python bench/graph_replay.py [--tree DIR]   (DIR: another checkout's root, to compare)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.path[:0] = [args.tree, str(Path(args.tree) / "backends")]
    import cupy

    import ndlite

    b = ndlite.get_backend("cupy")
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(b)
    opt = ndlite.optim.RMSprop(model.parameters(), lr=1e-3)
    r = np.random.default_rng(0)
    x, y = r.standard_normal((128, 1, 28, 28), dtype=np.float32), r.integers(0, 10, 128)

    def step(x, y):
        opt.zero_grad()
        loss = ndlite.nn.functional.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    graph = ndlite.cuda.capture(step, x, y, optimizers=[opt])
    for _ in range(20):
        graph(x, y).item()
    walls, gpu = [], []
    for _ in range(args.rounds):
        b.synchronize()
        start = time.perf_counter()
        for _ in range(args.replays):
            graph(x, y).item()
        walls.append((time.perf_counter() - start) / args.replays * 1e6)
        events = cupy.cuda.Event(), cupy.cuda.Event()
        events[0].record()
        for _ in range(args.replays):
            graph.recorder.graph.launch()
        events[1].record()
        events[1].synchronize()
        gpu.append(cupy.cuda.get_elapsed_time(*events) / args.replays * 1e3)
    print(f"{args.tree} on {b.device_name()}: replay {statistics.median(walls):.1f} us "
          f"{[round(v) for v in walls]}; the graph's GPU time alone "
          f"{statistics.median(gpu):.1f} us {[round(v) for v in gpu]}")


if __name__ == "__main__":
    main()
