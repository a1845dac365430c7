"""The open question of docs/pytorch-programs.md: word_language_model's Transformer trained
as main.py does (lr 20, dropout on: 0.2 after the positional encoding, nn.Transformer's 0.1)
for one epoch, then its validation loss, per seed, with torch and with ndlite.

    python tools/outside/dropout_seeds.py --root /work/outside --init copy --seeds 10-16

--init copy: ndlite starts from torch's initial weights (only the dropout draws differ);
--init own: each library initializes its own model from the seed.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockstep import Side, apply_workarounds, copy_weights  # noqa: E402
from programs import WordTransformer, word_data  # noqa: E402
from swap import load_module  # noqa: E402


def valid_batches(root: str, bsz: int = 10, bptt: int = 35):
    data = load_module(os.path.join(root, "src", "wlm", "data.py"), "torch")
    ids = data.Corpus(os.path.join(root, "data", "shakespeare-words")).valid.numpy()
    cols = ids[:len(ids) // bsz * bsz].reshape(bsz, -1).T.copy()
    return [(cols[i:i + bptt], cols[i + 1:i + 1 + bptt].reshape(-1))
            for i in range(0, len(cols) - 1 - bptt, bptt)]


def one_seed(args, seed, program, data, batches, valid, sides) -> dict:
    path = os.path.join(args.root, "src", "wlm", "model.py")
    models = {}
    for lib, side in sides.items():
        side.T.manual_seed(seed)
        models[lib] = program.build(load_module(path, lib), side, data)
    if args.init == "copy":
        copy_weights(models["torch"], models["ndlite"], sides["torch"])
    out = {}
    for lib, side in sides.items():
        model = models[lib]
        model.pos_encoder.dropout.p = 0.2  # main.py's --dropout default
        model.train()
        step = program.make_step(model, side)
        for x, y in batches:
            step(model, side.tensor(x), side.tensor(y))
        model.eval()
        crit = side.T.nn.NLLLoss()
        with side.T.no_grad():
            out[lib] = float(np.mean([crit(model(side.tensor(x)).view(-1, data["vocab"]),
                                           side.tensor(y)).item() for x, y in valid]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/work/outside")
    parser.add_argument("--init", choices=["copy", "own"], default="copy")
    parser.add_argument("--seeds", default="10-16")
    args = parser.parse_args()
    apply_workarounds(["contiguous"])
    lo, hi = (int(s) for s in args.seeds.split("-"))
    data = word_data(args.root)
    program = WordTransformer(data)
    batches, valid = program.batches(data, 30), valid_batches(args.root)
    sides = {lib: Side(lib, "cpu") for lib in ("torch", "ndlite")}
    for seed in range(lo, hi):
        res = one_seed(args, seed, program, data, batches, valid, sides)
        print(f"{args.init} seed {seed}: valid loss torch {res['torch']:.2f} "
              f"ndlite {res['ndlite']:.2f}", flush=True)


if __name__ == "__main__":
    main()
