"""The op registry: every differentiable op declared once, with the spec that tests it.

An op is a class with
- `forward(backend, *buffers, **params)`: the result buffer, computed with backend primitives;
- `backward(node, grad)`: one gradient per input (or None), written in Tensor ops, so
  gradients of gradients come for free;
- `save_inputs` / `save_output`: what backward reads (`node.saved`, `node.output()`);
- `spec`: how the conformance kit and the gradchecks draw inputs for it and judge results.

`@register` puts the class into `OPS`; the tests, the conformance kit and `docs/ops.md` are
all generated from that table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: tolerance classes (DESIGN.md, "Tolerance policy")
SCALED = "scaled"  # contractions and arithmetic: |y - r| <= 8 eps S, S = the op on |inputs|
EXACT = "exact"  # selection and movement: bitwise equal
TRANSCENDENTAL = "transcendental"  # exp, log, tanh, ...: rtol 1e-5, atol 1e-6 (float32)


@dataclass(frozen=True)
class Spec:
    """How to test an op.

    sample:  name of a sampler in `ndlite.testing.samplers` that draws valid inputs and params
    call:    the public function to test, as "module:attribute" (default "ndlite:<op name>")
    tol:     SCALED, EXACT or TRANSCENDENTAL
    domain:  range of float input values
    kinks:   how gradchecks keep inputs away from non-differentiable points: None, "zero"
             (|x| >= margin), "pair" (inputs differ by >= margin), "distinct" (all values
             distinct: ties of max/sort), "bounds" (away from clamp bounds), "integer"
    grad:    whether the op is differentiable (gradchecked and VJP-compared)
    second_order: include in the second-order (Hessian-vector) checks
    dtypes:  the float dtypes to test (integer ops list their own)
    bound:   the "S" of the scaled tolerance, if not the op itself on absolute values:
             a function of the float64 absolute inputs and params
    params:  fixed extra arguments for the sampler
    """

    sample: str
    call: str | None = None
    tol: str = SCALED
    domain: tuple = (-2.0, 2.0)
    kinks: str | None = None
    grad: bool = True
    second_order: bool = False
    dtypes: tuple = ("float32", "float64")
    bound: Callable | None = None
    params: dict = field(default_factory=dict)


class Op:
    """Base of every op. Subclasses define `name`, `forward`, `backward` and `spec`."""

    name: str = "?"
    spec: Spec | None = None
    save_inputs: bool = False
    save_output: bool = False
    #: True for functions composed from other ops: no forward/backward of their own
    composite: bool = False
    #: False for ops whose output has no gradient (comparisons, argmax)
    differentiable: bool = True
    #: None (promote inputs), "float" (integers compute in float32), "no_bool" (bool is an
    #: error), "integral" (float is an error)
    dtype_rule: str | None = None

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


def declare(name: str, spec: Spec) -> type[Op]:
    """Register a function composed from other ops (mean, var, ...) so the kit tests it too;
    its gradient comes from the ops it is made of."""
    return register(type(name, (Op,), {"name": name, "spec": spec, "composite": True}))


def resolve(op: type[Op]) -> Callable:
    """The public function that the spec of `op` tests."""
    import importlib

    target = (op.spec.call if op.spec and op.spec.call else None) or f"ndlite:{op.name}"
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
