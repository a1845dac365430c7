"""One op, one drawn case, one backend, against the reference: values, every VJP, determinism.

The comparison (DESIGN.md, "Tolerance policy"):
1. run the op on the backend under test in `dtype` (float32 inputs as drawn), then the VJP for
   every differentiable input with one random cotangent per float output;
2. run the same on the reference, the NumPy backend in float64 on the same inputs cast up,
   with the same cotangents cast up;
3. judge each output and each gradient under the op's tolerance class: SCALED against
   8 eps S (S from the magnitude backend, or the spec's `bound`), EXACT bitwise (its gradients,
   which may sum cotangents, are SCALED), TRANSCENDENTAL by rtol/atol (its gradients scaled
   by the magnitude VJP, so cancelling sums are not misjudged); a long sum may round once per
   term, so the allowance grows with the rounding count R of each element (roundings.py);
   in float16/bfloat16 with the half's eps, bitwise for the ops whose `half_tol` is EXACT,
   and with the tight check of `tight_half` on the values of ROUNDS_ONCE contractions;
4. run the backend a second time: outputs and gradients must be bitwise identical.

>>> import numpy as np
>>> from ndlite.testing import Case, compare
>>> case = Case([np.float32([[1, 2], [3, 4]]), np.float32([[1], [-1]])])
>>> compare("matmul", case, "numpy", "float32").ok
True
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from functools import cache

import numpy as np

import ndlite

from ..device.registry import get_backend
from ..dtypes import HALF, is_floating
from ..ops.registry import EXACT, ROUNDS_ONCE, SCALED, TRANSCENDENTAL, resolve
from .catalog import get_op
from .magnitude import magnitude_backend, recording_backend
from .roundings import rounding_backend
from .samplers import Case
from .tolerance import Verdict, judge, tight_half

#: the name of the backend every other one is compared with
REFERENCE = "numpy"


class ConformanceError(AssertionError):
    """A backend disagrees with the reference (raised by `check`)."""


@dataclass
class Run:
    """What one execution of an op produced, as host arrays."""

    outputs: list  # every tensor output, in order
    grads: list  # one per differentiable input (None where no gradient reached it)


@dataclass
class Outcome:
    """The verdicts of one comparison, keyed "value", "value[1]", "grad[0]", "determinism"."""

    op: str
    backend: str
    dtype: str
    checks: dict = field(default_factory=dict)
    error: str = ""  # the backend raised where the reference did not

    @property
    def ok(self) -> bool:
        return not self.error and all(v.ok for v in self.checks.values())

    @property
    def worst(self) -> float:
        """The worst error over every check, in units of its tolerance."""
        if self.error:
            return float("inf")
        return max((v.worst for v in self.checks.values()), default=0.0)

    def failures(self) -> list[str]:
        lines = [f"raised {self.error}"] if self.error else []
        return lines + [f"{what}: {v.message}" for what, v in self.checks.items() if not v.ok]

    def __str__(self) -> str:
        head = f"{self.op} on {self.backend} in {self.dtype}"
        if self.ok:
            return f"{head}: ok (worst {self.worst:.3g} of the tolerance)"
        return head + ":\n  " + "\n  ".join(self.failures())


def _outputs(out) -> list:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o for o in outs if isinstance(o, ndlite.Tensor)]


def _host(t) -> np.ndarray:
    return np.array(t.detach().numpy(), copy=True)


def cotangents(shapes: list, dtype, seed: int) -> list[np.ndarray]:
    """Seeded standard-normal cotangents, rounded to `dtype` (shared by every run)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def execute(fn, case: Case, inputs: list, backend, grad: list[int], cots=None,
            seed: int = 0, cot_dtype=np.float32) -> tuple[Run, list]:
    """Run `fn` on `backend` and, when `grad` is non-empty, its VJP with `cots` (drawn from
    `seed` in `cot_dtype` when None). Returns the run and the cotangents used."""
    tensors = [ndlite.tensor(a, backend=backend, requires_grad=i in grad)
               for i, a in enumerate(inputs)]
    with ndlite.enable_grad():
        outs = _outputs(case.call(fn, tensors))
    outputs = [_host(o) for o in outs]
    if not grad:
        return Run(outputs, []), []
    diff = [o for o in outs if o.requires_grad]
    if cots is None:
        cots = cotangents([o.shape for o in diff], cot_dtype, seed)
    if not diff:
        return Run(outputs, [np.zeros_like(inputs[i]) for i in grad]), cots
    grad_outputs = [ndlite.tensor(np.asarray(v, dtype=o.dtype), backend=backend)
                    for o, v in zip(diff, cots, strict=False)]
    found = ndlite.autograd.grad(diff, [tensors[i] for i in grad], grad_outputs=grad_outputs,
                                 allow_unused=True)
    grads = [np.zeros(inputs[i].shape, inputs[i].dtype) if g is None else _host(g)
             for g, i in zip(found, grad, strict=False)]
    return Run(outputs, grads), cots


def _cast_floats(arrays: list, dtype, magnitude: bool = False) -> list:
    out = []
    for a in arrays:
        a = np.asarray(a)
        if is_floating(a.dtype):
            a = a.astype(dtype)
            if magnitude:
                a = np.abs(a)
        out.append(a)
    return out


def _bound(spec, inputs: list, params: dict) -> np.ndarray:
    """The spec's own S: `bound(*|float64 inputs|, **the params it names)`."""
    sig = inspect.signature(spec.bound)
    named = {k: v for k, v in params.items() if k in sig.parameters}
    return np.asarray(spec.bound(*_cast_floats(inputs, np.float64, magnitude=True), **named),
                      dtype=np.float64)


def _plus_zero(a: np.ndarray) -> np.ndarray:
    return np.asarray(a + a.dtype.type(0)) if is_floating(a.dtype) else a  # -0.0 + 0.0: +0.0


def _expected_dtype(reference: np.ndarray, dtype: np.dtype) -> np.dtype:
    return dtype if is_floating(reference.dtype) else reference.dtype


def _judge_one(actual, reference, tol, dtype, scale=None, roundings=None) -> Verdict:
    want = _expected_dtype(reference, dtype)
    if actual.dtype != want:
        return Verdict(False, np.inf, None,
                       f"dtype {actual.dtype} differs from the expected {want}")
    if scale is not None:
        scale = np.maximum(np.nan_to_num(np.abs(scale), nan=0.0), np.abs(reference))
    return judge(actual, reference, tol, dtype, scale, roundings)


def _judge_values(outcome, actual, reference, tols, dtype, magnitude, counts, bound) -> None:
    """Judge every output: S from the spec's `bound` or the magnitude run, R from the
    rounding counts; in half, the tight check of ROUNDS_ONCE ops and, for a composite
    TRANSCENDENTAL op (R > 1), S from the magnitudes its terms had before rounding."""
    tol, half_tol = tols
    for k, (a, r) in enumerate(zip(actual.outputs, reference.outputs, strict=False)):
        what = "value" if len(actual.outputs) == 1 else f"value[{k}]"
        scale = roundings = None
        if tol != EXACT and is_floating(r.dtype):
            roundings = counts.outputs[k]
            if tol == SCALED:
                scale = bound if bound is not None else magnitude.outputs[k]
            elif dtype in HALF:
                scale = np.where(roundings > 1, magnitude.outputs[k], np.abs(r))
        outcome.checks[what] = _judge_one(a, r, tol, dtype, scale, roundings)
        if half_tol == ROUNDS_ONCE and outcome.checks[what].ok:
            outcome.checks[f"{what} (tight half)"] = tight_half(a, r, dtype, scale, roundings)


def _bitwise(first: Run, second: Run) -> Verdict:
    pairs = [("value", a, b) for a, b in zip(first.outputs, second.outputs, strict=False)]
    pairs += [("grad", a, b) for a, b in zip(first.grads, second.grads, strict=False)]
    for what, a, b in pairs:
        v = judge(a, b, EXACT, a.dtype)
        if not v.ok:
            return Verdict(False, np.inf, v.where, f"a second run differs in a {what}: "
                                                   f"{v.message}")
    return Verdict(True, 0.0)


def _scale_runs(fn, case: Case, cots, grad) -> tuple:
    """S and R of the tolerance policy: the op replayed on magnitudes (the reference's own
    decisions, recorded first) and on the rounding-count backend, in float64."""
    float64, cots64 = _cast_floats(case.inputs, np.float64), _cast_floats(cots, np.float64)
    recorder, magnitudes = recording_backend(), magnitude_backend()
    recorder.tape = []
    execute(fn, case, float64, recorder, grad, cots=cots64)
    magnitudes.replay(recorder.tape)  # the reference's decisions, on magnitudes
    magnitude, _ = execute(fn, case, float64, magnitudes, grad, cots=cots64)
    counts, _ = execute(fn, case, float64, rounding_backend(), grad, cots=cots64)
    return magnitude, counts


def compare(op, case: Case, backend, dtype, seed: int = 0, determinism: bool = True,
            order: int = 1) -> Outcome:
    """Judge `op` (a registry op or its name) on `backend` for one drawn `case`.

    `case.inputs` are in `dtype` already (as a sampler draws them); `seed` picks the
    cotangents. With `order=2` the op under test is the op's VJP itself (values: the
    gradients; gradients: Hessian-vector products). Exceptions of the reference propagate
    (the case itself is bad); an exception of the backend under test is a failure.
    """
    op = get_op(op) if isinstance(op, str) else op
    spec = op.spec
    backend = get_backend(backend)
    dtype = np.dtype(dtype)
    fn = resolve(op)
    tol, label = spec.tol, op.name
    if order == 2:
        case = second_order(case, dtype, seed + 1)
        tol = TRANSCENDENTAL if spec.tol == TRANSCENDENTAL else SCALED
        label = f"{op.name} (2nd order)"
    half_tol = spec.half_tol if dtype in HALF and order == 1 else None
    if half_tol == EXACT:  # + - * / sqrt: computed in float32 and rounded once, bitwise
        tol = EXACT
    grad = case.differentiable() if spec.grad else []
    outcome = Outcome(label, backend.name, str(dtype))

    # cotangents are drawn in `dtype`, so the backend and the reference see the same values
    reference, cots = execute(fn, case, _cast_floats(case.inputs, np.float64),
                              get_backend(REFERENCE), grad, seed=seed, cot_dtype=dtype)
    try:
        actual, _ = execute(fn, case, case.inputs, backend, grad, cots=cots)
    except Exception as exc:  # noqa: BLE001 - any error of the backend is a finding
        outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
    if len(actual.outputs) != len(reference.outputs):
        outcome.error = (f"returned {len(actual.outputs)} tensors, the reference "
                         f"{len(reference.outputs)}")
        return outcome

    magnitude = counts = None
    if grad or tol != EXACT:
        magnitude, counts = _scale_runs(fn, case, cots, grad)

    judged, wanted = actual, reference
    if spec.zero_ties:  # either zero of a -0.0/0.0 tie (Spec.zero_ties): both judged as +0.0
        judged, wanted = (Run([_plus_zero(o) for o in run.outputs], run.grads)
                          for run in (actual, reference))
    own = spec.bound is not None and order == 1
    _judge_values(outcome, judged, wanted, (tol, half_tol), dtype, magnitude, counts,
                  _bound(spec, case.inputs, case.params) if own and tol == SCALED else None)

    grad_tol = TRANSCENDENTAL if tol == TRANSCENDENTAL else SCALED
    for k, i in enumerate(grad):
        a, r = actual.grads[k], reference.grads[k]
        outcome.checks[f"grad[{i}]"] = _judge_one(a, r, grad_tol, dtype, magnitude.grads[k],
                                                  counts.grads[k])

    if determinism:
        again, _ = execute(fn, case, case.inputs, backend, grad, cots=cots)
        outcome.checks["determinism"] = _bitwise(actual, again)
    return outcome


def check(op, case: Case, backend, dtype, seed: int = 0, determinism: bool = True,
          order: int = 1) -> Outcome:
    """`compare`, raising ConformanceError with every failed check when it does not pass."""
    outcome = compare(op, case, backend, dtype, seed, determinism, order)
    if not outcome.ok:
        raise ConformanceError(str(outcome))
    return outcome


@cache
def cases(op, dtype):
    """The hypothesis strategy of Cases for `op` in `dtype`: the op's sampler, with inputs
    moved off its kinks when its tolerance is not bitwise (near a kink, float32 rounding
    decides the branch and the results are ill-conditioned, not wrong). Bitwise ops keep
    their ties: a backend must break them the reference's way. Built once per (op, dtype)."""
    from . import kinks
    from .samplers import strategy

    op = get_op(op) if isinstance(op, str) else op
    spec = op.spec
    drawn = strategy(spec, dtype)
    if spec.kinks is None or spec.tol == EXACT:
        return drawn

    def off_kinks(case: Case) -> Case:
        grad = case.differentiable()
        inputs = kinks.apply(spec.kinks, case.inputs, case.params, grad)
        return Case(inputs, case.params, case.grad, case.invoke)

    return drawn.map(off_kinks)


def second_order(case: Case, dtype, seed: int) -> Case:
    """The case whose op is the VJP of `case`'s op: it returns the gradients of every
    differentiable input for a fixed cotangent (drawn from `seed` in `dtype`, so every
    backend sees the same values), with the graph kept so they can be differentiated again."""
    grad = case.differentiable()
    dtype = np.dtype(dtype)

    def gradients(fn, tensors, params):
        with ndlite.enable_grad():
            outs = [o for o in _outputs(case.call(fn, tensors)) if o.requires_grad]
            if not outs:
                return ()
            rng = np.random.default_rng(seed)
            cots = [ndlite.tensor(rng.standard_normal(o.shape).astype(dtype), dtype=o.dtype,
                                  backend=o.backend) for o in outs]
            found = ndlite.autograd.grad(outs, [tensors[i] for i in grad], cots,
                                         create_graph=True, allow_unused=True)
        return tuple(g for g in found if g is not None)

    return Case(case.inputs, case.params, grad, gradients)
