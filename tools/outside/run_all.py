"""Compare outside PyTorch programs run on ndlite (import lines swapped) with PyTorch.

    tools/outside/prepare.sh DIR                      # the sources and data, once
    python tools/outside/run_all.py --root DIR --device cpu --out OUT.json
    python tools/outside/run_all.py --root DIR --device cuda --out OUT.json

Part 1 (lockstep.py, programs.py): nanoGPT model.py, ng-video-lecture gpt.py and
word_language_model's LSTM and Transformer, built from the same file with torch and with
ndlite, the torch initial weights copied in, the same batches and optimizer, dropout off;
per-step losses in float32 and float64 and their largest difference.
Part 2: word_language_model's own main.py (1 epoch, tiny sizes) run unchanged with torch
and through run_swapped.py with ndlite, in subprocesses; their printed losses side by side.
--device cuda: ndlite on CuPy, torch on cuda (TF32 off), main.py with --accel.
Needs torch and ndlite importable (PYTHONPATH=repo:repo/backends).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback

START = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from lockstep import apply_workarounds, char_data, lockstep  # noqa: E402
from programs import PROGRAMS, word_data  # noqa: E402
from swap import changed_lines  # noqa: E402


def part1(args) -> list[dict]:
    chars, words = char_data(args.root), None
    out = []
    for key in [k for k in args.programs.split(",") if k]:
        if key in ("lstm", "transformer", "transformer_lr1"):
            words = words or word_data(args.root)
        data = chars if key in ("nanogpt", "gpt") else words
        program = PROGRAMS[key](data)
        path = os.path.join(args.root, "src", program.file)
        for dtype in args.dtypes.split(","):
            t0 = time.perf_counter()
            if t0 - START > args.budget:
                out.append({"program": program.name, "dtype": dtype, "skipped": "time budget"})
                continue
            try:
                rec = lockstep(program, path, args.device, dtype, args.steps, data)
            except Exception as exc:  # record what ndlite lacks, keep going
                rec = {"program": program.name, "device": args.device, "dtype": dtype,
                       "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc(limit=-4)}
            rec["wall_s"] = round(time.perf_counter() - t0, 2)
            out.append(rec)
            print(summary(rec), flush=True)
    return out


def summary(rec: dict) -> str:
    if "skipped" in rec:
        return f"{rec['program']:34s} {rec['dtype']:8s} skipped ({rec['skipped']})"
    if "error" in rec:
        return f"{rec['program']:34s} {rec['dtype']:8s} ERROR {rec['error']}"
    return (f"{rec['program']:34s} {rec['dtype']:8s} {rec['steps']:3d} steps  loss "
            f"{rec['first_loss'][0]:.4f}->{rec['last_loss'][0]:.4f} torch  "
            f"{rec['first_loss'][1]:.4f}->{rec['last_loss'][1]:.4f} ndlite  "
            f"max|diff| {rec['max_abs_diff']:.2e}  ({rec['seconds_torch']:.1f}s / "
            f"{rec['seconds_ndlite']:.1f}s)")


_LOSS = re.compile(r"(valid|test) loss\s+([\d.]+)")


def run_main(args, model: str, lib: str, seed: int) -> dict:
    left = args.total - (time.perf_counter() - START)
    if left < 15:
        print(f"main.py --model {model} {lib} seed {seed}: skipped (time budget)")
        return {"program": f"word_language_model main.py --model {model}", "lib": lib,
                "seed": seed, "skipped": "time budget"}
    main = os.path.join(args.root, "src", "wlm", "main.py")
    flags = ["--data", os.path.join(args.root, "data", "shakespeare-words"), "--model", model,
             "--emsize", "64", "--nhid", "64", "--nlayers", "2", "--nhead", "2", "--epochs",
             "1", "--log-interval", "10", "--dropout", "0.2", "--seed", str(seed)]
    if args.device == "cuda":
        flags.append("--accel")
    env = dict(os.environ, NDLITE_BACKEND="cupy" if args.device == "cuda" else "numpy",
               OUTSIDE_WORKAROUNDS=args.workarounds)
    with tempfile.TemporaryDirectory() as tmp:
        flags += ["--save", os.path.join(tmp, "model.pt")]
        cmd = [sys.executable, main] if lib == "torch" else \
            [sys.executable, os.path.join(HERE, "run_swapped.py"), main]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd + flags, cwd=os.path.dirname(main), env=env, text=True,
                                  capture_output=True, timeout=min(args.main_timeout, left))
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout
            proc = subprocess.CompletedProcess(cmd, 124, out or "", "timed out")
    text = proc.stdout + proc.stderr
    losses = {k: float(v) for k, v in _LOSS.findall(text)}
    rec = {"program": f"word_language_model main.py --model {model}", "lib": lib, "seed": seed,
           "device": args.device, "returncode": proc.returncode, "ran_to_end": "End of training"
           in text, "seconds": round(time.perf_counter() - t0, 2), **losses,
           "train_losses": [float(x) for x in re.findall(r"\| loss\s+([\d.]+)", text)]}
    if proc.returncode:
        rec["error_tail"] = text.strip().splitlines()[-6:]
    print(f"{rec['program']:40s} {lib:6s} seed {seed:4d} rc={proc.returncode} "
          f"end={rec['ran_to_end']} "
          f"valid={losses.get('valid')} test={losses.get('test')} {rec['seconds']}s", flush=True)
    if proc.returncode:
        print("   " + "\n   ".join(rec["error_tail"]), flush=True)
    return rec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.environ.get("OUTSIDE_ROOT", "/work/outside"))
    parser.add_argument("--device", choices=["cpu", "cuda", "opencl"], default="cpu",
                        help="opencl: ndlite on OpenCL against torch on cpu (main.py, which "
                        "picks 'cpu' itself, is then left out)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--programs", default="nanogpt,gpt,lstm,transformer,transformer_lr1")
    parser.add_argument("--mains", default="LSTM,Transformer", help="'' to skip main.py")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds; lock-step runs not started by then are skipped "
                        "(recorded); default 150 on cuda, none on cpu")
    parser.add_argument("--total", type=float, default=None,
                        help="seconds; main.py runs are cut (rc 124) or skipped to end by then; "
                        "default 225 on cuda, none on cpu")
    parser.add_argument("--main-seeds", default="",
                        help="main.py --seed values (torch and ndlite draw different streams); "
                        "default 1111,1,2 on cpu, 1111 on cuda")
    parser.add_argument("--main-timeout", type=int, default=120)
    parser.add_argument("--workarounds", default="",
                        help="comma list from lockstep.WORKAROUNDS, e.g. contiguous")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    args.root = os.path.abspath(args.root)  # main.py runs from its own folder
    if args.device == "opencl":
        args.mains = ""
    args.main_seeds = args.main_seeds or ("1111" if args.device == "cuda" else "1111,1,2")
    gpu = args.device == "cuda"
    args.budget = args.budget if args.budget is not None else (150 if gpu else float("inf"))
    args.total = args.total if args.total is not None else (225 if gpu else float("inf"))
    import numpy
    import torch

    workarounds = [w for w in args.workarounds.split(",") if w]
    apply_workarounds(workarounds)
    t0 = time.perf_counter()
    results = {"workarounds": workarounds, "root": args.root, "device": args.device,
               "torch": torch.__version__,
               "numpy": numpy.__version__, "python": platform.python_version(),
               "host": platform.node(), "lockstep": part1(args)}
    results["swapped_lines"] = {os.path.relpath(k, args.root): v
                                for k, v in changed_lines.items()}
    if args.out:  # part 1 kept even if part 2 is cut short
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    results["main_py"] = [run_main(args, m, lib, int(seed)) for m in args.mains.split(",") if m
                          for seed in args.main_seeds.split(",") for lib in ("torch", "ndlite")]
    commits = os.path.join(args.root, "src", "COMMITS")
    if os.path.exists(commits):
        with open(commits) as f:
            results["sources"] = f.read().split("\n")[:-1]
    results["wall_s"] = round(time.perf_counter() - t0, 1)
    print(f"total {results['wall_s']} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
        print("wrote", args.out)


if __name__ == "__main__":
    main()
