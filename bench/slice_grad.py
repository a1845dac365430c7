"""Gradients of slices accumulated in place (issue 15): the backward of `qkv -> q, k, v ->
(q * k * v).sum()` at the character GPT's sizes, and the character GPT's backward calls,
with the in-place accumulation (ndlite/slice_grads.py) and with the plain path it replaces
(every slice gradient materialized as zeros of the whole input with the piece written in,
then the pieces summed full-size).

- qkv: a leaf h of shape (B, T, 3C), qkv = h.reshape(B, T, 3, heads, C / heads).permute(2, 0,
  3, 1, 4) as CausalSelfAttention does, q, k, v = qkv[0], qkv[1], qkv[2]; timed: the
  backward alone (the forward is rebuilt outside the timer), min and median over
  `--repeats`, the two paths alternating so a busy shared machine slows both alike;
- gpt: ndlite.nn.GPT(65, block 256, 6 layers, 6 heads, 384 wide), one backward of its
  cross-entropy at batch `--gpt-batch`: the backend calls (outermost calls of the contract),
  by name, and the bytes of the buffers `full` and `add` return (the zero fills and sums
  the change removes); the calls do not depend on the batch, the bytes scale with it.

Both paths must give the same gradients: the bench checks they are equal, bit for bit
(a zero's sign aside), before it reports.

    OPENBLAS_NUM_THREADS=1 python bench/slice_grad.py [--json slice_grad_numpy]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (puts ndlite on sys.path)

import ndlite  # noqa: E402
from ndlite.ops.movement import Slice  # noqa: E402
from ndlite.slice_grads import SLICING  # noqa: E402


@contextlib.contextmanager
def path(in_place: bool):
    """The in-place accumulation (the default), or the plain path it replaces."""
    if not in_place:
        SLICING.discard(Slice)
    try:
        yield
    finally:
        SLICING.add(Slice)


@contextlib.contextmanager
def counting(b, calls: Counter, nbytes: Counter):
    """Count the outermost contract calls of backend b by name, and the bytes of what `full`
    and `add` return."""
    def record(name, begun, ended):
        calls[name] += 1

    sized = {n: getattr(b, n) for n in ("full", "add")}
    saved = {n: b.__dict__.get(n) for n in sized}

    def sizing(name, fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            nbytes[name] += int(np.prod(out.shape)) * np.dtype(out.dtype).itemsize
            return out
        return call

    for n, fn in sized.items():
        setattr(b, n, sizing(n, fn))
    try:
        with common.timing_calls(b, time.perf_counter, time.perf_counter, record):
            yield
    finally:
        common.restore(b, saved)


def qkv_loss(h, heads: int):
    batch, length, width3 = h.shape
    qkv = h.reshape(batch, length, 3, heads, width3 // 3 // heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    return (q * k * v).sum()


def qkv_bench(b, batch: int, length: int, width: int, heads: int, repeats: int) -> dict:
    h0 = np.random.default_rng(0).standard_normal((batch, length, 3 * width), dtype=np.float32)
    h = ndlite.tensor(h0, backend=b, requires_grad=True)
    times = {True: [], False: []}
    grads = {}
    for r in range(repeats + 1):
        for in_place in (True, False):
            h.grad = None
            loss = qkv_loss(h, heads)
            with path(in_place):
                b.synchronize()
                t0 = time.perf_counter()
                loss.backward()
                b.synchronize()
                if r:  # the first round warms up
                    times[in_place].append(time.perf_counter() - t0)
            grads[in_place] = h.grad.numpy()
    np.testing.assert_array_equal(grads[True], grads[False])
    counts = {}
    for in_place in (True, False):
        calls, nbytes = Counter(), Counter()
        h.grad = None
        loss = qkv_loss(h, heads)
        with path(in_place), counting(b, calls, nbytes):
            loss.backward()
        counts[in_place] = {"calls": dict(sorted(calls.items())), "bytes": dict(nbytes)}
    ms = {k: sorted(round(t * 1e3, 2) for t in v) for k, v in times.items()}
    return {"shape_h": [batch, length, 3 * width], "heads": heads,
            "qkv_mb": round(h0.nbytes / 2**20, 1),
            "backward_ms": {
                name: {"min": ms[k][0], "median": round(statistics.median(ms[k]), 2),
                       "all": ms[k]}
                for name, k in (("in_place", True), ("plain", False))},
            "backward_counts": {"in_place": counts[True], "plain": counts[False]}}


def gpt_counts(b, batch: int) -> dict:
    ndlite.manual_seed(0)
    model = ndlite.nn.GPT(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384)
    model.to(b)
    data = np.random.default_rng(0).integers(0, 65, (batch, 257))
    x = ndlite.tensor(data[:, :-1], backend=b)
    y = ndlite.tensor(data[:, 1:], backend=b)
    out, grads = {}, {}
    for in_place in (True, False):
        model.zero_grad()
        loss = model(x, y)[1]
        calls, nbytes = Counter(), Counter()
        with path(in_place), counting(b, calls, nbytes):
            loss.backward()
        grads[in_place] = [p.grad.numpy() for p in model.parameters()]
        out["in_place" if in_place else "plain"] = {
            "calls_total": sum(calls.values()), "calls": dict(sorted(calls.items())),
            "full_mb": round(nbytes["full"] / 2**20, 1), "add_mb": round(nbytes["add"] / 2**20, 1)}
    for a, c in zip(grads[True], grads[False]):
        np.testing.assert_array_equal(a, c)
    return {"batch": batch, "length": 256, **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--gpt-batch", type=int, default=4)
    parser.add_argument("--json", help="write bench/results/<JSON>.json")
    args = parser.parse_args()
    b = ndlite.get_backend(args.backend)
    qkv = qkv_bench(b, args.batch, 256, 384, 6, args.repeats)
    for name, row in qkv["backward_ms"].items():
        calls, nbytes = (qkv["backward_counts"][name][k] for k in ("calls", "bytes"))
        print(f"qkv {qkv['shape_h']} {name:8s} backward min {row['min']:8.2f} ms, median "
              f"{row['median']:8.2f} ms; full {calls.get('full', 0)} calls "
              f"{nbytes.get('full', 0) / 2**20:.0f} MB, add {calls.get('add', 0)} calls "
              f"{nbytes.get('add', 0) / 2**20:.0f} MB")
    gpt = gpt_counts(b, args.gpt_batch)
    for name in ("in_place", "plain"):
        row = gpt[name]
        print(f"gpt batch {gpt['batch']} {name:8s} backward: {row['calls_total']} calls, full "
              f"{row['calls'].get('full', 0)} ({row['full_mb']} MB), add "
              f"{row['calls'].get('add', 0)} ({row['add_mb']} MB)")
    if args.json:
        saved = common.save(args.json, {"backend": args.backend, "qkv": qkv, "gpt": gpt})
        print(f"wrote {saved}")


if __name__ == "__main__":
    main()
