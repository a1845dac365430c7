"""What the kit tests: every op in the registry, and the dtypes each backend can run it in.

Ops register themselves when their module is imported, and packages add samplers in
`ndlite.testing.samplers_*` modules; `load()` imports all of both, so an op added anywhere in
`ndlite.ops` (conv, pooling, losses) is picked up without touching the kit.

>>> "matmul" in op_names()
True
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from functools import lru_cache

from ..dtypes import as_dtype
from ..errors import DTypeError


@lru_cache(maxsize=1)
def load() -> dict:
    """Import every op module and every sampler module; returns the op registry."""
    import ndlite.ops
    import ndlite.testing

    for package in (ndlite.ops, ndlite.testing):
        for module in pkgutil.iter_modules(package.__path__):
            if package is ndlite.ops or module.name.startswith("samplers"):
                importlib.import_module(f"{package.__name__}.{module.name}")
    for extra in ("ndlite.nn", "ndlite.nn.functional"):  # may register composite ops
        importlib.import_module(extra)
    from ndlite.ops.registry import OPS

    return OPS


def op_names(pattern: str | None = None) -> list[str]:
    """Sorted names of the registered ops with a spec, optionally filtered by glob(s)
    separated by commas ("conv*,max_pool2d")."""
    ops = load()
    names = sorted(name for name, op in ops.items() if op.spec is not None)
    if not pattern:
        return names
    globs = [p.strip() for p in pattern.split(",") if p.strip()]
    return [n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs)]


def get_op(name: str):
    ops = load()
    if name not in ops:
        raise KeyError(f"no op named {name!r} in the registry (known: {', '.join(sorted(ops))})")
    return ops[name]


def dtypes_of(op) -> tuple:
    """The dtypes the op's spec asks to be tested."""
    return tuple(op.spec.dtypes)


def dtype_skip_reason(backend, dtype) -> str | None:
    """Why `backend` cannot run `dtype` (None when it can): a skipped dtype is reported. The
    capability is the backend's `dtypes`: a backend that adds float16 there turns its half
    tests on; bfloat16 without ml_dtypes is skipped naming the package."""
    try:
        dtype = as_dtype(dtype)
    except DTypeError as exc:
        return str(exc)
    if dtype in backend.dtypes:
        return None
    return f"{backend.name} does not report {dtype} in its dtypes " \
           f"({', '.join(sorted(str(d) for d in backend.dtypes))})"
