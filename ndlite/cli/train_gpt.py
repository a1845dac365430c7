"""`ndlite train gpt`: train a character-level GPT (ndlite.nn.GPT) on a text file and report
the train and validation loss every --eval-interval steps, then print a sample of text.

    ndlite train gpt --preset small --steps 300          # the bundled text, minutes on a CPU
    ndlite train gpt --data ../shared/data/tinyshakespeare/input.txt --backend cupy
    ndlite train gpt --data input.txt --metrics gpt.jsonl --save gpt.npz

The default model is the lecture's "Let's build GPT" size: 6 layers, width 384, 6 heads,
context 256, batch 64, dropout 0.2, AdamW lr 3e-4, 5000 steps. `--preset small` is a model a
CPU trains in minutes. Losses are means over --eval-iters random windows of each split.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from ..serialization import save
from .steps import Mixed, add_amp_option, fail

#: the lecture's model, and one a CPU trains in minutes; explicit options override either
PRESETS = {
    "lecture": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64,
                    dropout=0.2, lr=3e-4, steps=5000, eval_interval=500, eval_iters=200),
    "small": dict(n_layer=2, n_head=4, n_embd=64, block_size=64, batch_size=16,
                  dropout=0.0, lr=1e-3, steps=500, eval_interval=100, eval_iters=20),
}
_SIZES = ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "steps", "eval_interval",
          "eval_iters")


def add_parser(tasks) -> None:
    p = tasks.add_parser("gpt", help="train a character-level GPT on a text file",
                         description="Train a decoder-only transformer on the characters of a "
                                     "text file; print train/val loss and a sample.")
    p.add_argument("--data", default=None, metavar="PATH",
                   help="a UTF-8 text file (default: the 200,000-character sample of tiny "
                        "shakespeare bundled with ndlite)")
    p.add_argument("--backend", default=None,
                   help="numpy, cupy, opencl[:N] or auto (default: $NDLITE_BACKEND or numpy)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="lecture",
                   help="lecture: 6 layers x 384, context 256, batch 64, 5000 steps (a GPU); "
                        "small: 2 x 64, context 64, batch 16, 500 steps (a CPU)")
    for name, what in (("n-layer", "transformer blocks"), ("n-head", "attention heads"),
                       ("n-embd", "model width"), ("block-size", "context length"),
                       ("batch-size", "sequences per step"), ("steps", "optimizer steps"),
                       ("eval-interval", "steps between loss reports"),
                       ("eval-iters", "batches per loss estimate")):
        p.add_argument(f"--{name}", type=int, default=None, metavar="N",
                       help=f"{what} (default: the preset's)")
    p.add_argument("--dropout", type=float, default=None, help="default: the preset's")
    p.add_argument("--lr", type=float, default=None, help="AdamW learning rate "
                                                          "(default: the preset's)")
    p.add_argument("--stop-at", type=float, default=None, metavar="LOSS",
                   help="stop at the first report whose validation loss is <= LOSS")
    p.add_argument("--sample-tokens", type=int, default=500, metavar="N",
                   help="characters to generate after training (default: 500; 0: none)")
    p.add_argument("--seed", type=int, default=0, help="seeds weights, batches and the sample")
    p.add_argument("--save", default=None, metavar="PATH",
                   help="write the model and optimizer state (and the vocabulary) to PATH")
    p.add_argument("--metrics", default=None, metavar="FILE",
                   help="write each report as a JSON line to FILE")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="write the run (arguments, device, every report, the sample) as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_amp_option(p)
    p.set_defaults(run=run)


def _config(args) -> dict:
    config = dict(PRESETS[args.preset])
    for key in _SIZES + ("dropout", "lr"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    return config


def _invalid(config: dict) -> str:
    for key in _SIZES:
        if config[key] <= 0:
            return f"--{key.replace('_', '-')} must be positive, got {config[key]}"
    if config["n_embd"] % config["n_head"]:
        return f"--n-embd {config['n_embd']} is not a multiple of --n-head {config['n_head']}"
    if not 0 <= config["dropout"] < 1 or config["lr"] <= 0:
        return (f"--dropout must be in [0, 1) and --lr positive, got {config['dropout']} and "
                f"{config['lr']}")
    return ""


def estimate_loss(model, data, config: dict, rng, backend, mixed=None) -> dict:
    """Mean loss over eval_iters random batches of each split, in eval mode (under --amp's
    autocast region when given)."""
    from contextlib import nullcontext

    from ..graph import no_grad

    model.eval()
    out = {}
    with no_grad(), (mixed.region() if mixed is not None else nullcontext()):
        for split in ("train", "val"):
            losses = [model(*data.batch(split, config["batch_size"], config["block_size"], rng,
                                        backend))[1].item()
                      for _ in range(config["eval_iters"])]
            out[split] = float(np.mean(losses))
    model.train()
    return out


def _train(model, optimizer, data, config, args, backend, log) -> list[dict]:
    """The steps, with a report every eval_interval steps and at the end."""
    from tqdm import tqdm

    mixed = Mixed(args.amp, backend)
    rng = np.random.default_rng(args.seed)
    eval_rng = np.random.default_rng(args.seed + 1)
    reports, started = [], time.perf_counter()
    bar = tqdm(range(config["steps"]), unit="step", disable=args.no_progress, file=sys.stderr)
    for step in bar:
        if step % config["eval_interval"] == 0 or step == config["steps"] - 1:
            losses = estimate_loss(model, data, config, eval_rng, backend, mixed)
            report = {"step": step, **losses, "elapsed_s": round(time.perf_counter() - started, 2)}
            reports.append(report)
            log(report)
            bar.write(f"step {step:5d}  train loss {losses['train']:.4f}  val loss "
                      f"{losses['val']:.4f}  {report['elapsed_s']:.1f} s")
            if args.stop_at is not None and losses["val"] <= args.stop_at:
                bar.write(f"validation loss {losses['val']:.4f} <= {args.stop_at}: stopping")
                break
        x, y = data.batch("train", config["batch_size"], config["block_size"], rng, backend)
        with mixed.region():
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        mixed.backward_step(loss, optimizer)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
    bar.close()
    return reports


def run(args) -> int:
    import ndlite

    from ..data import CharText
    from ..errors import BackendUnavailableError

    config = _config(args)
    problem = _invalid(config)
    if problem:
        return fail(problem)
    try:
        backend = ndlite.get_backend(args.backend)
        data = CharText.from_file(args.data) if args.data else CharText.bundled()
    except (BackendUnavailableError, ValueError, KeyError, OSError) as exc:
        return fail(str(exc).splitlines()[0])
    if Mixed.problem(args.amp, backend):
        return fail(Mixed.problem(args.amp, backend))
    ndlite.manual_seed(args.seed)
    model = ndlite.nn.GPT(data.vocab_size, config["block_size"], config["n_layer"],
                          config["n_head"], config["n_embd"], config["dropout"]).to(backend)
    optimizer = ndlite.optim.AdamW(model.parameters(), lr=config["lr"])
    count = sum(p.numel() for p in model.parameters())
    print(f"training a {count / 1e6:.2f}M-parameter GPT ({config['n_layer']} layers x "
          f"{config['n_embd']}, {config['n_head']} heads, context {config['block_size']}) on "
          f"{len(data.data):,} characters of {args.data or 'the bundled sample'} "
          f"(vocabulary {data.vocab_size}); backend {backend.name}, batch "
          f"{config['batch_size']}, AdamW lr {config['lr']}, "
          f"{Mixed(args.amp, backend).describe()}", flush=True)
    metrics = open(args.metrics, "w") if args.metrics else None  # noqa: SIM115

    def log(report):
        if metrics:
            metrics.write(json.dumps(report) + "\n")
            metrics.flush()

    try:
        reports = _train(model, optimizer, data, config, args, backend, log)
    finally:
        if metrics:
            metrics.close()
    sample = _sample(model, data, args, backend)
    _write_outputs(args, model, optimizer, data, config, backend, reports, sample)
    return 0


def _sample(model, data, args, backend) -> str:
    import ndlite

    if args.sample_tokens <= 0:
        return ""
    start = ndlite.zeros((1, 1), dtype=ndlite.int64, backend=backend)
    generator = ndlite.Generator().manual_seed(args.seed)
    ids = model.generate(start, args.sample_tokens, generator=generator)[0].tolist()
    text = data.decode(ids[1:])
    print(f"--- a sample of {args.sample_tokens} characters ---\n{text}\n---")
    return text


def _write_outputs(args, model, optimizer, data, config, backend, reports, sample) -> None:
    if args.save:
        save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
              "steps": reports[-1]["step"] if reports else 0, "config": config,
              "vocabulary": "".join(data.chars)}, args.save)
        print(f"saved the model, optimizer state and vocabulary to {args.save}")
    if args.json:
        from ..benchmark import machine_info

        with open(args.json, "w") as f:
            json.dump({"command": " ".join(["ndlite", *sys.argv[1:]]),
                       "config": config, "backend": backend.name,
                       "device": backend.device_name(), "machine": machine_info([backend]),
                       "reports": reports, "sample": sample}, f, indent=2)

