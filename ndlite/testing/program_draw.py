"""Drawing the programs of the program fuzzer (programs.py): leaves of size-0, size-1 and
small dims, and steps that read earlier slots. Each step is a plain tuple, so a failing
program prints as code that replays it:

- ("unary", i, name, c): a new slot, UNARY[name] of slot i (c for scale and shift);
- ("binary", i, j, name): slot i op slot j (same shapes), or ("matmul", i, j);
- ("view", i, kind, arg): a view of slot i (slice, transpose, reshape);
- ("inplace", name, i, arg): an in-place op on slot i, a non-leaf (arg: a number, a slot, or
  (a number,); for setitem (key, value));
- ("detach", i, ...), ("nograd", i, name, c): a constant slot; ("sum", i, dim),
  ("mean", i, dim): a reduction; ("retain", i): retain_grad on slot i; ("hook", i, kind):
  a gradient hook on slot i that changes no value ("observe" returns None, "clone" a new
  tensor equal to the gradient), so the derivative stays the oracles' while the engine takes
  its hooked paths (a leaf's pieces summed first, a returned gradient copied).
"""

from __future__ import annotations

import numpy as np

UNARY = ("tanh", "sigmoid", "neg", "square", "scale", "shift", "exp")
BINARY = ("add", "sub", "mul")
INPLACE = ("mul_", "add_", "sub_", "copy_", "setitem")


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
                                 "detach", "nograd", "sum", "retain", "mean", "matmul",
                                 "hook"]))
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
    if kind in ("sum", "mean"):
        dim = draw(st.integers(0, len(m["shape"]) - 1)) if m["shape"] else None
        if kind == "mean" and (m["shape"][dim] if dim is not None else 1) == 0:
            kind = "sum"  # a mean over nothing is NaN, and NaN spreads to every derivative
        new["shape"] = () if dim is None else m["shape"][:dim] + m["shape"][dim + 1:]
        return (kind, i, dim), new
    if kind == "matmul":
        right = [j for j, s in enumerate(slots) if len(s["shape"]) == 2 and len(m["shape"]) == 2
                 and s["shape"][0] == m["shape"][1]]
        if right:
            j = draw(st.sampled_from(right))
            new.update(shape=(m["shape"][0], slots[j]["shape"][1]),
                       const=m["const"] and slots[j]["const"])
            return ("matmul", i, j), new
        kind = "unary"
    if kind == "retain":
        return ("retain", i), None
    if kind == "hook":
        return ("hook", i, draw(st.sampled_from(("observe", "clone")))), None
    new["const"] = new["const"] or kind in ("detach", "nograd")
    name = draw(st.sampled_from(UNARY))
    return (kind if kind != "inplace" else "unary", i, name, draw(scalar)), new


def draw_programs(max_steps: int = 8):
    """A hypothesis strategy of (leaves, steps) with 3..max_steps steps."""
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
        return leaves, steps

    return draw_program()
