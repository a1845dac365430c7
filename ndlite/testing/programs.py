"""Program-level fuzzing: whole small programs, checked against independent oracles.

The conformance kit proves each op of each backend against the reference; this proves what
the reference and the autograd engine share. Hypothesis draws a `Program`: one or two float64
leaves (size-0 and size-1 dims included) and 3-8 steps over them (elementwise ops, views and
views of views, in-place ops on views and on non-leaves, setitem, retain_grad, detach, no_grad
blocks, sums). Its output is a weighted sum of every value it made. `check(program, backend)`
runs it on `backend` and compares the leaves' gradients (and retained ones)
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

UNARY = ("tanh", "sigmoid", "neg", "square", "scale", "shift")
BINARY = ("add", "sub", "mul")
INPLACE = ("mul_", "add_", "sub_", "copy_", "setitem")
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
    elif kind == "sum":
        x = slots[step[1]]
        slots.append(x.sum() if step[2] is None else x.sum(step[2]))
    elif kind == "retain":
        if slots[step[1]].requires_grad:
            slots[step[1]].retain_grad()
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
    return len(program.leaves) + sum(s[0] not in ("retain", "inplace") for s in program.steps[:k])


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


# ---- drawing programs ------------------------------------------------------------------------


def _shape_after_view(shape: tuple, kind: str, arg) -> tuple:
    if kind == "transpose":
        return (shape[1], shape[0])
    if kind == "slice":
        return np.empty(shape)[arg].shape
    return np.empty(shape).reshape(arg).shape


def _draw_view(draw, st, shape):
    """A view step for a slot of `shape`: (kind, arg)."""
    options = ["reshape"]
    if len(shape) == 2:
        options.append("transpose")
    if shape:
        options.append("slice")
    kind = draw(st.sampled_from(options))
    if kind == "transpose":
        return kind, None
    if kind == "reshape":
        return kind, draw(st.sampled_from([(-1,), (1, *shape), tuple(reversed(shape))]
                                          if len(shape) != 2 else [(-1,), (1, *shape)]))
    n = shape[0]
    if n and draw(st.booleans()):
        return kind, draw(st.integers(0, n - 1))
    start = draw(st.integers(0, n))
    stop = draw(st.integers(start, n))
    if len(shape) == 2 and shape[1] and draw(st.booleans()):
        return kind, (slice(start, stop), draw(st.integers(0, shape[1] - 1)))
    return kind, slice(start, stop)


def _draw_inplace(draw, st, slots, i, scalar):
    """An in-place step on slot i (a non-leaf that is no constant)."""
    shape, root = slots[i]["shape"], slots[i]["root"]
    apart = [j for j, m in enumerate(slots) if m["root"] != root]  # no aliasing of source
    name = draw(st.sampled_from(INPLACE))
    if name == "setitem":
        if not shape:
            name = "mul_"
        else:
            key = draw(st.one_of(st.integers(0, shape[0] - 1), st.just(slice(0, 1)))) \
                if shape[0] else slice(0, 0)
            target = np.empty(shape)[key].shape
            same = [j for j in apart if slots[j]["shape"] == target]
            value = draw(st.sampled_from(same)) if same and draw(st.booleans()) else \
                (draw(scalar),)
            return ("inplace", "setitem", i, (key, value))
    same = [j for j in apart if slots[j]["shape"] == shape]
    if name == "copy_" and not same:
        name = "mul_"
    if name == "mul_":
        return ("inplace", "mul_", i, draw(scalar))
    if name == "copy_":
        return ("inplace", "copy_", i, draw(st.sampled_from(same)))
    arg = draw(st.sampled_from(same)) if same and draw(st.booleans()) else (draw(scalar),)
    return ("inplace", name, i, arg)


def _draw_step(draw, st, slots, scalar):
    kind = draw(st.sampled_from(["inplace", "view", "unary", "binary", "inplace", "view",
                                 "detach", "nograd", "sum", "retain"]))
    writable = [j for j, m in enumerate(slots) if not m["leafy"] and not m["const"]]
    if kind == "inplace" and writable:  # the newest slots first: views of non-leaves
        i = writable[-1 - draw(st.integers(0, len(writable) - 1))]
        return _draw_inplace(draw, st, slots, i, scalar), None
    i = len(slots) - 1 - draw(st.integers(0, len(slots) - 1))
    m = slots[i]
    new = {"shape": m["shape"], "leafy": False, "const": m["const"], "root": len(slots)}
    if kind == "view":
        view, arg = _draw_view(draw, st, m["shape"])
        new.update(shape=_shape_after_view(m["shape"], view, arg), leafy=m["leafy"],
                   root=m["root"])
        return ("view", i, view, arg), new
    if kind == "binary":
        same = [j for j, s in enumerate(slots) if s["shape"] == m["shape"]]
        j = draw(st.sampled_from(same))
        new["const"] = m["const"] and slots[j]["const"]
        return ("binary", i, j, draw(st.sampled_from(BINARY))), new
    if kind == "sum":
        dim = draw(st.integers(0, len(m["shape"]) - 1)) if m["shape"] else None
        new["shape"] = () if dim is None else m["shape"][:dim] + m["shape"][dim + 1:]
        return ("sum", i, dim), new
    if kind == "retain":
        return ("retain", i), None
    new["const"] = new["const"] or kind in ("detach", "nograd")
    name = draw(st.sampled_from(UNARY))
    return (kind if kind != "inplace" else "unary", i, name, draw(scalar)), new


def programs(max_steps: int = 8):
    """A hypothesis strategy of Programs with 3..max_steps steps."""
    from hypothesis import strategies as st

    scalar = st.floats(-1.5, 1.5, allow_nan=False, allow_subnormal=False)

    @st.composite
    def draw_program(draw):
        shapes = [tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
                  for _ in range(draw(st.integers(1, 2)))]
        leaves = [np.array(draw(st.lists(scalar, min_size=int(np.prod(s)),
                                         max_size=int(np.prod(s)))),
                           dtype=np.float64).reshape(s) for s in shapes]
        slots = [{"shape": s, "leafy": True, "const": False, "root": k}
                 for k, s in enumerate(shapes)]
        steps = []
        for _ in range(draw(st.integers(3, max_steps))):
            step, new = _draw_step(draw, st, slots, scalar)
            steps.append(step)
            if new is not None:
                slots.append(new)
        return Program(leaves, steps)

    return draw_program()


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
