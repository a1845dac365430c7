"""Program-level fuzzing: whole small programs, checked against independent oracles.

The conformance kit proves each op of each backend against the reference; this proves what
the reference and the autograd engine share. Hypothesis draws a `Program`: one or two float64
leaves (size-0 and size-1 dims included) and 3-8 steps over them (elementwise ops, views and
views of views, in-place ops on views and on non-leaves, setitem, retain_grad, gradient
hooks, detach, no_grad blocks, sums). Its output is a weighted sum of every value it made.
`check(program, backend)` runs it on `backend` and compares the leaves' gradients (and
retained ones)
- with float64 central finite differences of the whole program (the true derivative; values
  that detach or no_grad make are held at their unperturbed values, as autograd sees them);
- with the reference backend;
- with PyTorch, when it is importable (also whether both raise).

`ndlite conformance --programs` runs it; a failure prints the shrunk program (replay it with
`check(Program(...), "numpy")`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .program_draw import draw_programs

EPS = 1e-6


@dataclass
class Program:
    """Leaves (float64 values) and steps; each step reads slots by number and most append one
    slot (the leaves are slots 0, 1, ...)."""

    leaves: list
    steps: list

    def __repr__(self) -> str:
        leaves = ", ".join(f"np.array({a.tolist()!r}).reshape({a.shape!r})" for a in self.leaves)
        return f"Program(leaves=[{leaves}], steps={self.steps!r})"


class ProgramError(AssertionError):
    """A program whose gradients disagree with an oracle."""


# ---- running a program with ndlite or torch ----------------------------------------------------


def _unary(name, x, c):
    if name == "tanh":
        return x.tanh()
    if name == "sigmoid":
        return x.sigmoid()
    if name == "neg":
        return -x
    if name == "square":
        return x * x
    if name == "exp":
        return x.exp()
    return x * c if name == "scale" else x + c


def _binary(name, x, y):
    return x + y if name == "add" else x - y if name == "sub" else x * y


def _view(x, kind, arg):
    if kind == "slice":
        return x[arg]
    if kind == "transpose":
        return x.transpose(0, 1)
    return x.reshape(arg)


def _step(lib, slots, step, frozen, k):
    kind = step[0]
    if kind == "unary":
        slots.append(_unary(step[2], slots[step[1]], step[3]))
    elif kind == "binary":
        slots.append(_binary(step[3], slots[step[1]], slots[step[2]]))
    elif kind == "view":
        slots.append(_view(slots[step[1]], step[2], step[3]))
    elif kind in ("detach", "nograd"):
        if frozen is not None:
            slots.append(lib.tensor(frozen[k]))
            return
        with lib.no_grad():
            x = slots[step[1]]
            slots.append(x.detach() * 1.0 if kind == "detach" else _unary(step[2], x, step[3]))
    elif kind in ("sum", "mean"):
        x = slots[step[1]]
        reduce = x.sum if kind == "sum" else x.mean
        slots.append(reduce() if step[2] is None else reduce(step[2]))
    elif kind == "matmul":
        slots.append(slots[step[1]] @ slots[step[2]])
    elif kind == "retain":
        if slots[step[1]].requires_grad:
            slots[step[1]].retain_grad()
    elif kind == "hook":
        if slots[step[1]].requires_grad:
            slots[step[1]].register_hook((lambda g: None) if step[2] == "observe" else
                                         (lambda g: g * 1.0))
    else:
        _inplace(slots, step)


def _inplace(slots, step):
    _, name, i, arg = step
    x = slots[i]
    if name == "setitem":
        key, value = arg
        x[key] = slots[value] if isinstance(value, int) else value[0]
    elif name == "copy_":
        x.copy_(slots[arg])
    elif name == "mul_":
        x.mul_(arg)
    else:
        other = slots[arg] if isinstance(arg, int) else arg[0]
        x.add_(other) if name == "add_" else x.sub_(other)


def _output(lib, slots):
    total = 0.0
    for k, s in enumerate(slots):
        n = int(np.prod(s.shape))
        weights = np.cos(np.arange(n, dtype=np.float64) * 0.7 + k).reshape(tuple(s.shape))
        total = total + (s * lib.tensor(weights)).sum()
    return total


class _Lib:
    """ndlite or torch, seen through the few calls a program makes."""

    def __init__(self, name: str, backend=None):
        if name == "torch":
            import torch

            self.mod, self.where = torch, {}
        else:
            import ndlite

            self.mod, self.where = ndlite, {"backend": backend}
        self.float64, self.no_grad = self.mod.float64, self.mod.no_grad

    def tensor(self, values):
        return self.mod.tensor(np.asarray(values, dtype=np.float64), dtype=self.float64,
                               **self.where)

    def leaf(self, values):
        t = self.tensor(values)
        t.requires_grad_(True)
        return t


def run(program: Program, lib: _Lib, leaves=None, frozen=None, grad=True):
    """(output value, leaf gradients, retained gradients, values of detach/no_grad steps)."""
    leaves = program.leaves if leaves is None else leaves
    slots = [lib.leaf(a) if grad else lib.tensor(a) for a in leaves]
    for k, step in enumerate(program.steps):
        _step(lib, slots, step, frozen, k)
    made = {k: _numpy(slots[_made_slot(program, k)]) for k, s in enumerate(program.steps)
            if s[0] in ("detach", "nograd")} if frozen is None else frozen
    out = _output(lib, slots)
    if not grad:
        return float(out), None, None, made
    if getattr(out, "requires_grad", False):
        out.backward()
    grads = [np.zeros(t.shape) if t.grad is None else _numpy(t.grad) for t in slots[:len(leaves)]]
    retained = {i: _numpy(s.grad) for i, s in enumerate(slots[len(leaves):], len(leaves))
                if getattr(s, "grad", None) is not None}
    return float(out.detach()), grads, retained, made


def _made_slot(program: Program, k: int) -> int:
    return len(program.leaves) + sum(s[0] not in ("retain", "inplace", "hook")
                                     for s in program.steps[:k])


def _numpy(t) -> np.ndarray:
    t = t.detach()
    return np.array(t.cpu().numpy() if hasattr(t, "cpu") else t.numpy(), dtype=np.float64)


# ---- the oracles -----------------------------------------------------------------------------


def _torch():
    try:
        import torch
    except ImportError:
        torch = None
    return torch


def finite_differences(program: Program, frozen) -> list:
    """d(output)/d(leaf) by float64 central differences on the reference backend."""
    lib = _Lib("ndlite", "numpy")
    grads = []
    for i, leaf in enumerate(program.leaves):
        g = np.zeros(leaf.shape)
        for j in range(leaf.size):
            values = []
            for sign in (1.0, -1.0):
                leaves = [a.copy() for a in program.leaves]
                leaves[i].flat[j] += sign * EPS
                values.append(run(program, lib, leaves, frozen, grad=False)[0])
            g.flat[j] = (values[0] - values[1]) / (2 * EPS)
        grads.append(g)
    return grads


def _close(name, got, want, rtol, atol, program):
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            raise ProgramError(f"{name}: gradient {k} is {g.tolist()}, expected {w.tolist()}"
                               f"\n  {program!r}")


def _attempt(program, lib):
    try:
        return run(program, lib), None
    except RuntimeError as exc:
        return None, exc


def check(program: Program, backend="numpy", torch: bool = True) -> str:
    """Run `program` on `backend` against every oracle; raise ProgramError on a disagreement.
    Returns "raised" when ndlite (and PyTorch, if checked) refused it, else "ok"."""
    mine, error = _attempt(program, _Lib("ndlite", backend))
    theirs = None
    if torch and _torch() is not None:
        theirs, torch_error = _attempt(program, _Lib("torch"))
        if (error is None) != (torch_error is None):
            raise ProgramError(f"ndlite raised {error!r}, PyTorch raised {torch_error!r}"
                               f"\n  {program!r}")
    if error is not None:
        return "raised"
    out, grads, retained, made = mine
    if not math.isclose(out, run(program, _Lib("ndlite", "numpy"), frozen=made, grad=False)[0],
                        rel_tol=1e-9, abs_tol=1e-12):
        raise ProgramError(f"the output differs between grad and no-grad runs\n  {program!r}")
    _close("finite differences", grads, finite_differences(program, made), 1e-4, 1e-5, program)
    if str(backend) != "numpy":
        ref = run(program, _Lib("ndlite", "numpy"))
        _close("reference", grads, ref[1], 1e-9, 1e-12, program)
        _close("reference retained", [retained[k] for k in sorted(retained)],
               [ref[2].get(k, np.zeros(0)) for k in sorted(retained)], 1e-9, 1e-12, program)
    if theirs is not None:
        _close("PyTorch", grads, theirs[1], 1e-9, 1e-12, program)
        if sorted(retained) != sorted(theirs[2]):
            raise ProgramError(f"retained gradients of slots {sorted(retained)}, PyTorch has "
                               f"{sorted(theirs[2])}\n  {program!r}")
        _close("PyTorch retained", [retained[k] for k in sorted(retained)],
               [theirs[2][k] for k in sorted(retained)], 1e-9, 1e-12, program)
    return "ok"


def programs(max_steps: int = 8):
    """A hypothesis strategy of Programs with 3..max_steps steps (program_draw.py)."""
    return draw_programs(max_steps).map(lambda drawn: Program(*drawn))


def fuzz(backends, max_examples: int = 200, seed: int | None = None) -> int:
    """`ndlite conformance --programs`: run the fuzzer on each backend, print what ran and any
    shrunk failing program; 0 when nothing was found."""
    failed = 0
    for backend in backends:
        counts, verdict = _fuzz_one(backend, max_examples, seed)
        failed += verdict != "nothing found"
        oracles = "finite differences, the reference" + (
            ", PyTorch" if _torch() is not None else " (PyTorch not installed)")
        print(f"{backend.name}: {counts['ok']} programs checked against {oracles}; "
              f"{counts['raised']} refused (a saved tensor changed in place); seed "
              f"{'derandomized' if seed is None else seed}: {verdict}")
    return 1 if failed else 0


def _fuzz_one(backend, max_examples: int, seed: int | None):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as use_seed

    counts = {"ok": 0, "raised": 0}

    @settings(max_examples=max_examples, derandomize=seed is None, deadline=None,
              database=None, suppress_health_check=list(HealthCheck))
    @given(programs())
    def one(program):
        counts[check(program, backend)] += 1

    if seed is not None:
        one = use_seed(seed)(one)
    try:
        one()
    except Exception as exc:  # noqa: BLE001 - any failure is a finding; hypothesis printed it
        return counts, f"FAILED\n{type(exc).__name__}: {exc}"
    return counts, "nothing found"
