"""Running the kit outside pytest: one op × backend × dtype as a hypothesis search, summed up.

`run` draws cases from the op's spec under a hypothesis profile, compares each with the
reference (`compare`), and returns a `Result`: examples run, the worst error in units of the
tolerance, and on a failure the shrunk failing example with a one-line reproduction (the
hypothesis blob that replays it exactly). `ndlite conformance` prints these as a table.

>>> from hypothesis import settings
>>> run("neg", "numpy", "float32", settings(max_examples=5, database=None)).status
'pass'
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass

import numpy as np
from hypothesis import given, reproduce_failure
from hypothesis import settings as Settings
from hypothesis import strategies as st

from ..device.registry import get_backend
from .catalog import dtype_skip_reason, get_op
from .compare import ConformanceError, cases, compare

PASS, FAIL, SKIP = "pass", "fail", "skip"
_BLOB = re.compile(r"@reproduce_failure\('([^']+)', b'([^']+)'\)")


@dataclass
class Result:
    op: str
    backend: str
    dtype: str
    status: str = PASS
    examples: int = 0
    worst: float = 0.0  # in units of the tolerance; <= 1 passes
    reason: str = ""  # why skipped, or what failed
    example: str = ""  # the shrunk failing case
    reproduce: str = ""  # one command that replays the failure

    @property
    def ok(self) -> bool:
        return self.status != FAIL

    def to_dict(self) -> dict:
        d = asdict(self)
        d["worst"] = None if not np.isfinite(self.worst) else self.worst
        return d


def describe(case, seed: int) -> str:
    """A case as Python literals, every float32 value written so it reads back exactly."""
    with np.printoptions(floatmode="unique", threshold=10_000):
        return (f"inputs={case.inputs!r}, params={case.params!r}, grad={case.grad!r}, "
                f"cotangent seed={seed}")


def reproduction(op: str, backend: str, dtype: str, blob: tuple | None, order: int = 1) -> str:
    command = ["ndlite", "conformance", "--backend", backend, "--ops", op, "--dtype", dtype,
               "--order", str(order)]
    if blob is not None:
        command += ["--reproduce", f"{blob[0]}:{blob[1]}"]
    return shlex.join(command)


def run(op: str, backend, dtype: str, settings: Settings | None = None,
        reproduce: str | None = None, on_example=None, order: int = 1) -> Result:
    """Search for a case where `backend` disagrees with the reference on `op` in `dtype`
    (with `order=2`, on the op's VJP: gradients and Hessian-vector products).

    `settings` is a hypothesis settings object (a profile); `reproduce` is a blob
    "version:data" printed by an earlier failure; `on_example()` is called after each example.
    """
    backend = get_backend(backend)
    result = Result(op if order == 1 else f"{op} (2nd order)", backend.name,
                    dtype if isinstance(dtype, str) else str(np.dtype(dtype)))
    why = _skip_reason(op, backend, result.dtype, order)
    if why:
        result.status, result.reason = SKIP, why
        return result
    failure: dict = {}

    @Settings(parent=settings or Settings(), database=None, print_blob=True)
    @given(data=st.data())
    def search(data):
        case = data.draw(cases(op, dtype), label="case")
        seed = data.draw(st.integers(0, 2**16 - 1), label="cotangent seed")
        try:
            outcome = compare(op, case, backend, dtype, seed, order=order)
        except Exception as exc:
            if not failure:
                result.examples += 1
            failure.update(case=case, seed=seed, message=f"{type(exc).__name__}: {exc}",
                           worst=float("inf"))
            raise
        if not failure:  # the calls after a failure are hypothesis shrinking it
            result.examples += 1
            if on_example is not None:
                on_example()
        if not outcome.ok:
            failure.update(case=case, seed=seed, message="; ".join(outcome.failures()),
                           worst=outcome.worst)
            raise ConformanceError(str(outcome))
        result.worst = max(result.worst, outcome.worst)

    if reproduce:
        version, _, blob = reproduce.partition(":")
        search = reproduce_failure(version, blob.encode())(search)
    try:
        search()
    except Exception as exc:  # noqa: BLE001 - every kind of failure is reported, not raised
        _failed(result, exc, failure, reproduce, op, order)
    return result


def _skip_reason(op: str, backend, dtype: str, order: int) -> str:
    """Why this run is skipped ("" when it runs)."""
    spec = get_op(op).spec
    if order == 2 and not spec.second_order:
        return f"the spec of {op} asks for no second-order check"
    if dtype not in spec.dtypes:
        return f"the spec of {op} does not list {dtype}"
    return dtype_skip_reason(backend, dtype) or ""


def _failed(result: Result, exc: Exception, failure: dict, reproduce: str | None, op: str,
            order: int) -> None:
    """Fill `result` in from a failed search: the reason, the shrunk case, the replay."""
    notes = "\n".join(getattr(exc, "__notes__", []))
    match = _BLOB.search(notes)
    result.status = FAIL
    result.worst = failure.get("worst", float("inf"))
    result.reason = failure.get("message") or f"{type(exc).__name__}: {exc}"
    if failure:
        result.example = describe(failure["case"], failure["seed"])
    blob = match.groups() if match else None
    if blob is None and reproduce:  # a replay prints no new blob: keep the one it got
        blob = tuple(reproduce.split(":", 1))
    result.reproduce = reproduction(op, result.backend, result.dtype, blob, order)
