"""Train an outside model with PyTorch and with ndlite in lock step and compare the losses.

Both models are built from the same file (ndlite's with the import lines swapped, see
swap.py), the PyTorch initial state_dict is copied into the ndlite model as NumPy arrays,
both get the same batches (drawn once with NumPy) and the same optimizer, dropout is off,
and the loss of every step is recorded on each side.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
from swap import load_module


class Side:
    """One library (torch or ndlite) on one device, with the helpers a program needs."""

    def __init__(self, lib: str, device: str):
        """device: "cpu" (ndlite on NumPy), "cuda" (CuPy; torch on cuda) or "opencl"
        (ndlite on OpenCL, torch on cpu)."""
        if lib == "torch" and device == "opencl":
            device = "cpu"
        self.lib, self.device = lib, device
        if lib == "torch":
            import torch
            self.T = torch
            if device == "cuda":  # full float32 matmuls, as ndlite/CuPy do
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
        else:
            import ndlite
            self.T = ndlite
            ndlite.set_backend({"cuda": "cupy", "cpu": "numpy"}.get(device, device))

    def tensor(self, array: np.ndarray):
        if self.lib == "torch":
            return self.T.from_numpy(np.ascontiguousarray(array)).to(self.device)
        return self.T.tensor(array)

    def numpy(self, t) -> np.ndarray:
        t = t.detach()
        return t.cpu().numpy() if self.lib == "torch" else t.numpy()

    def sync(self):
        if self.device == "cuda":
            self.T.cuda.synchronize()


def _contiguous_copy(self):
    """Tensor.contiguous() as a C-order copy (ndlite's returns self, and .view() then raises
    on a transposed tensor): reshape(-1) copies in C order, the reshape back is a view."""
    return self.reshape(-1).reshape(self.shape)


def _whole_module_checkpoints(ndlite) -> None:
    """torch.save(model, f) / torch.load(f) of a whole module, which main.py does after each
    epoch (ndlite.save takes state dicts only, without pickle): the module is kept in memory
    under the file's name. With it the names main.py lists for torch.load's allow-list:
    torch.serialization.safe_globals and torch.nn.modules.<file>.<Class>."""
    import contextlib
    import types

    kept, save, load = {}, ndlite.save, ndlite.load

    def save_any(obj, f):
        if not isinstance(obj, ndlite.nn.Module):
            return save(obj, f)
        kept[getattr(f, "name", f)] = (obj, {k: v.numpy().copy()
                                             for k, v in obj.state_dict().items()})

    def load_any(f, *args, **kwargs):
        name = getattr(f, "name", f)
        if name not in kept:
            return load(f, *args, **kwargs)
        module, state = kept[name]
        module.load_state_dict(state)
        return module

    ndlite.save, ndlite.load = save_any, load_any
    ndlite.serialization.safe_globals = lambda names: contextlib.nullcontext()
    nn, ns = ndlite.nn, types.SimpleNamespace
    nn.modules = ns(activation=ns(MultiheadAttention=nn.MultiheadAttention),
                    container=ns(ModuleList=nn.ModuleList), dropout=ns(Dropout=nn.Dropout),
                    linear=ns(Linear=nn.Linear, NonDynamicallyQuantizableLinear=nn.Linear),
                    normalization=ns(LayerNorm=nn.LayerNorm), sparse=ns(Embedding=nn.Embedding),
                    transformer=ns(TransformerEncoder=nn.TransformerEncoder,
                                   TransformerEncoderLayer=nn.TransformerEncoderLayer),
                    rnn=ns(GRU=nn.GRU, LSTM=nn.LSTM, RNN=nn.RNN))


WORKAROUNDS = {"contiguous": lambda ndlite: setattr(ndlite.Tensor, "contiguous",
                                                    _contiguous_copy),
               "checkpoints": _whole_module_checkpoints}


def apply_workarounds(names: list[str]) -> None:
    """Harness-side stand-ins for what ndlite lacks, only when asked (recorded in the JSON)."""
    import ndlite
    for name in names:
        WORKAROUNDS[name](ndlite)


def copy_weights(model_t, model_n, side_t: Side) -> int:
    """The torch model's state_dict into the ndlite model (strict: the same names and shapes)."""
    state = {k: side_t.numpy(v) for k, v in model_t.state_dict().items()}
    model_n.load_state_dict(state)
    return len(state)


def _loop(side: Side, model, step, batches) -> tuple[list[float], float]:
    losses, t0 = [], time.perf_counter()
    for batch in batches:
        losses.append(float(step(model, *[side.tensor(a) for a in batch])))
    side.sync()
    return losses, time.perf_counter() - t0


def lockstep(program, path: str, device: str, dtype: str, steps: int, data) -> dict:
    """Run `program` (an object with build/make_step/batches) on both sides; the record."""
    sides = {lib: Side(lib, device) for lib in ("torch", "ndlite")}
    batches = program.batches(data, steps)
    models, record = {}, {"program": program.name, "device": device, "dtype": dtype,
                          "steps": steps}
    for lib, side in sides.items():
        mod = load_module(path, lib, keep=program.keep, env=program.env(side))
        side.T.manual_seed(1337)
        models[lib] = program.build(mod, side, data)
        if dtype == "float64":
            models[lib] = models[lib].double()
        if lib == "torch":
            models[lib] = models[lib].to(side.device)
        else:
            record["tensors_copied"] = copy_weights(models["torch"], models[lib], sides["torch"])
        program.mode(models[lib])
    for lib, side in sides.items():
        step = program.make_step(models[lib], side)
        losses, seconds = _loop(side, models[lib], step, batches)
        record[f"loss_{lib}"] = losses
        record[f"seconds_{lib}"] = round(seconds, 3)
    lt, ln = np.array(record["loss_torch"]), np.array(record["loss_ndlite"])
    record["max_abs_diff"] = float(np.max(np.abs(lt - ln)))
    record["max_abs_diff_first5"] = float(np.max(np.abs(lt - ln)[:5]))
    record["first_loss"] = [lt[0], ln[0]]
    record["last_loss"] = [lt[-1], ln[-1]]
    record["finite"] = bool(all(math.isfinite(v) for v in ln))
    return record


def char_data(root: str) -> dict:
    with open(os.path.join(root, "data", "input.txt"), encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return {"ids": np.array([index[c] for c in text], dtype=np.int64), "vocab": len(chars)}


def char_batches(ids: np.ndarray, steps: int, batch: int, block: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        ix = rng.integers(0, len(ids) - block - 1, size=batch)
        x = np.stack([ids[i:i + block] for i in ix])
        y = np.stack([ids[i + 1:i + block + 1] for i in ix])
        out.append((x, y))
    return out
