"""Where the character GPT's training step spends its GPU time on the cupy backend: CUDA
events around every backend call (the outermost one only), summed per primitive over 3 steps
after 3 warm-up steps, and the step's synchronized wall time over 20 steps (issue 14).

    python bench/gpt_profile.py --data ../shared/data/tinyshakespeare/input.txt [--amp bf16]

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
import common  # noqa: E402,F401  (puts ndlite on sys.path)

import ndlite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a text file (tiny shakespeare)")
    parser.add_argument("--amp", choices=["bf16", "fp16"], default=None,
                        help="the forward under ndlite.autocast in this dtype")
    args = parser.parse_args()
    import cupy

    b = ndlite.get_backend("cupy")
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

    for _ in range(3):
        step().item()
    b.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        step()
    b.synchronize()
    print(f"{b.name}: {1000 * (time.perf_counter() - start) / 20:.1f} ms/step (wall)")

    records, depth = [], [0]

    def timed(name, fn):
        def call(*a, **k):
            if depth[0]:  # inside another timed call: counted there
                return fn(*a, **k)
            depth[0] += 1
            begin, end = cupy.cuda.Event(), cupy.cuda.Event()
            begin.record()
            try:
                return fn(*a, **k)
            finally:
                end.record()
                records.append((name, begin, end))
                depth[0] -= 1
        return call

    for name in dir(b):
        fn = getattr(b, name)
        if not name.startswith("_") and callable(fn) and name not in (
                "synchronize", "device_name", "info"):
            setattr(b, name, timed(name, fn))
    for _ in range(3):
        step()
    cupy.cuda.Device().synchronize()
    total, calls = collections.defaultdict(float), collections.Counter()
    for name, begin, end in records:
        total[name] += cupy.cuda.get_elapsed_time(begin, end) / 3
        calls[name] += 1
    print(f"GPU ms per step by primitive (sum {sum(total.values()):.1f} ms)")
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{name:24s} {ms:8.2f} ms  {calls[name] // 3:5d} calls")


if __name__ == "__main__":
    main()
