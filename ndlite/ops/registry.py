"""The op registry: every differentiable op declared once, with the spec that tests it.

An op is an `Op` subclass with
- `forward(backend, *buffers, **params)`: the result buffer, computed with backend primitives;
- `backward(node, grad)`: one gradient per input (or None), written in Tensor ops, so
  gradients of gradients come for free;
- `save_inputs` / `save_output`: what backward reads (`node.saved`, `node.output()`);
- `spec`: how the conformance kit and the gradchecks draw inputs for it and judge results;
- `function`: the public function that applies it (set by `@implements(Op)` or by `define`).

Families of simple ops are declared in one line each with `define(name, forward, backward,
...)`; ops that need more keep a small class with `@register`. `OPS` is the table the tests,
the conformance kit and `docs/ops.md` are generated from.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .samples import Sampler

#: tolerance classes (DESIGN.md, "Tolerance policy")
SCALED = "scaled"  # contractions and arithmetic: |y - r| <= 8 eps S, S = the op on |inputs|
EXACT = "exact"  # selection and movement: bitwise equal
TRANSCENDENTAL = "transcendental"  # exp, log, tanh, ...: rtol 1e-5, atol 1e-6 (float32)
#: a half-precision class (Spec.half_tol): a contraction that accumulates in float32 and
#: rounds once, judged SCALED plus a tight check that flags an accumulation in half
ROUNDS_ONCE = "rounds_once"
#: the float dtypes an op is tested in unless its spec lists others; a backend without one
#: (its `dtypes`) is skipped for it, so a backend adding float16 turns its tests on
FLOATS = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True)
class Spec:
    """How to test an op.

    sample:  the kind of input to draw (an object of ndlite.ops.samples)
    call:    the function to test, if not the op's own public function (adapters for ops
             whose arguments are not plain tensors)
    tol:     SCALED, EXACT or TRANSCENDENTAL
    domain:  range of float input values
    kinks:   how gradchecks keep inputs away from non-differentiable points: None, "zero"
             (|x| >= margin), "pair" (inputs differ by >= margin), "distinct" (all values
             distinct: ties of max/sort), "bounds" (away from clamp bounds), "integer"
    grad:    whether the op is differentiable (gradchecked and VJP-compared)
    second_order: include in the second-order (Hessian-vector) checks
    dtypes:  the float dtypes to test (integer ops list their own); FLOATS by default
    half_tol: the tolerance class in float16/bfloat16 where it differs from `tol`: EXACT for
             + - * / sqrt (computed in float32 and rounded once, they are correctly rounded),
             ROUNDS_ONCE for contractions (SCALED with the half's eps, plus the tight check)
    bound:   the "S" of the scaled tolerance, if not the op itself on absolute values:
             a function of the float64 absolute inputs and params
    params:  fixed extra arguments for the sampler
    zero_ties: a tie of -0.0 and 0.0 may give either zero (max/min reductions and max-pooling:
             NumPy's own loops pick differently in float32 and float64, so no reference fixes
             one); the kit compares such zeros as equal
    """

    sample: Sampler
    call: Callable | None = None
    tol: str = SCALED
    domain: tuple = (-2.0, 2.0)
    kinks: str | None = None
    grad: bool = True
    second_order: bool = False
    dtypes: tuple = FLOATS
    half_tol: str | None = None
    bound: Callable | None = None
    params: dict = field(default_factory=dict)
    zero_ties: bool = False


class Op:
    """Base of every op. Subclasses define `name`, `forward`, `backward` and `spec`."""

    name: str = "?"
    spec: Spec | None = None
    #: True, or the indices of the inputs backward reads (the others are not kept)
    save_inputs: bool | tuple = False
    #: with save_inputs=True, optionally: the inputs backward reads, given which inputs need a
    #: gradient (x * y keeps x only if y needs one), so changing another in place is no error
    save_for: Callable | None = None
    save_output: bool = False
    #: True for functions composed from other ops: no forward/backward of their own
    composite: bool = False
    #: False for ops whose output has no gradient (comparisons, argmax)
    differentiable: bool = True
    #: None (promote inputs), "float" (integers compute in float32), "no_bool" (bool is an
    #: error), "integral" (float is an error)
    dtype_rule: str | None = None
    #: the public function that applies this op (what the spec tests by default)
    function: Callable | None = None

    @staticmethod
    def forward(backend, *buffers, **params) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(node, grad):
        raise NotImplementedError


OPS: dict[str, type[Op]] = {}


def register(op: type[Op]) -> type[Op]:
    """Class decorator: add `op` to the registry under `op.name`."""
    if op.name in OPS and OPS[op.name] is not op:
        raise ValueError(f"op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def implements(op: type[Op]):
    """Decorator for the public function of `op`: the function the kit tests by default."""

    def deco(fn: Callable) -> Callable:
        op.function = fn
        return fn

    return deco


def define(name: str, forward: Callable | None, backward: Callable | None = None, *,
           spec: Spec | None, save: str = "", dtype_rule: str | None = None,
           differentiable: bool = True) -> type[Op]:
    """Declare and register an op from its two functions: `forward(backend, *buffers,
    **params)` and `backward(node, grad)`. `save` names what backward reads: "inputs",
    "output" or "inputs+output"."""
    body = {"name": name, "spec": spec, "dtype_rule": dtype_rule,
            "__module__": sys._getframe(1).f_globals["__name__"],  # where it is declared
            "differentiable": differentiable and backward is not None,
            "save_inputs": "inputs" in save, "save_output": "output" in save,
            "forward": staticmethod(forward)}
    if backward is not None:
        body["backward"] = staticmethod(backward)
    title = "".join(part.capitalize() for part in name.split("_"))
    return register(type(title, (Op,), body))


def declare(name: str, spec: Spec, function: Callable | None = None) -> type[Op]:
    """Register a function composed from other ops (mean, var, ...) so the kit tests it too;
    its gradient comes from the ops it is made of."""
    return register(type(name, (Op,), {"name": name, "spec": spec, "composite": True,
                                       "function": function}))


def resolve(op: type[Op]) -> Callable:
    """The public function that the spec of `op` tests."""
    if op.spec is not None and op.spec.call is not None:
        return op.spec.call
    if op.function is None:
        raise LookupError(f"op {op.name!r} has no public function: decorate it with "
                          f"@implements({op.__name__}) or give its spec a call=")
    return op.function
