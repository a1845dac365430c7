"""Finding, choosing and caching backends.

Backends are found the way third-party plugins are: the entry-point group `ndlite.backends`
maps a name to a factory (`factory(device: str | None) -> Backend`). A short built-in table
does the same for the backends that ship with ndlite, so a source checkout on PYTHONPATH
(where no entry points are installed) still finds them. `register_backend` adds one at run time.

The default backend comes from `NDLITE_BACKEND` (read at first use, not at import):
`numpy` (the default), `cupy`, `cupy:1`, `opencl`, `opencl:0`, `opencl:cpu`, `opencl:gpu`,
or `auto` (the best available, announced once on stderr). PyTorch's device names work
wherever a backend name does: "cpu" is the NumPy backend, "cuda" / "cuda:N" the CuPy one
(`Device` is what `Tensor.device` returns and `ndlite.device(...)` makes). A backend that
cannot run raises `BackendUnavailableError` with the reason and the fix; there is never a
silent fallback.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import BackendUnavailableError
from .protocol import Backend

ENV_VAR = "NDLITE_BACKEND"
ENTRY_POINT_GROUP = "ndlite.backends"

#: name -> "module:attribute" of the factory, for the backends that ship with ndlite
BUILTIN = {
    "numpy": "ndlite_numpy:NumpyBackend",
    "cupy": "ndlite_cupy:CupyBackend",
    "opencl": "ndlite_opencl:OpenCLBackend",
}
#: PyTorch's device types -> the backend that runs them
ALIASES = {"cpu": "numpy", "cuda": "cupy"}
_TYPE_OF = {backend: alias for alias, backend in ALIASES.items()}
#: extras that install each built-in backend's dependencies
INSTALL_HINT = {
    "cupy": "pip install 'ndlite[cuda12]' or 'ndlite[cuda13]' (matching your CUDA driver)",
    "opencl": "pip install 'ndlite[pocl]' for a CPU device, or 'ndlite[opencl]' with a vendor "
              "driver (and its ICD registered: see OCL_ICD_VENDORS in the README)",
}
#: the order `auto` tries
AUTO_ORDER = ("cupy", "opencl:gpu", "numpy")

_factories: dict[str, Callable | str] = {}
_broken: dict[str, str] = {}
_instances: dict[tuple[str, str | None], Backend] = {}
_default: Backend | None = None
_discovered = False


class _Local(threading.local):
    """Per thread: the `using(...)` blocks this thread is inside (as in PyTorch, a device
    context in one thread does not move another thread's new tensors)."""

    def __init__(self):
        self.stack: list[Backend] = []


_local = _Local()


def _discover() -> None:
    """Fill the factory table from entry points, then the built-in table (once)."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            _factories.setdefault(ep.name, ep.value)
    except Exception as exc:  # a broken environment must not break ndlite
        warnings.warn(f"ndlite: could not read entry points: {exc}", stacklevel=2)
    for name, target in BUILTIN.items():
        _factories.setdefault(name, target)


def _source_checkout_path() -> None:
    """Make `backends/` importable when ndlite runs from a source checkout on PYTHONPATH."""
    backends = Path(__file__).resolve().parents[2] / "backends"
    if backends.is_dir() and str(backends) not in sys.path:
        sys.path.append(str(backends))


def _load_factory(name: str) -> Callable:
    target = _factories[name]
    if callable(target):
        return target
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        _source_checkout_path()
        module = importlib.import_module(module_name)
    factory = getattr(module, attr)
    _factories[name] = factory
    return factory


def register_backend(name: str, factory: Callable) -> None:
    """Add (or replace) a backend: `factory(device: str | None)` returns a Backend.

    >>> import ndlite
    >>> ndlite.register_backend("mynumpy", lambda device: ndlite.get_backend("numpy"))
    """
    _discover()
    if not name.isidentifier():
        raise ValueError(f"register_backend: name {name!r} must be an identifier")
    name = name.lower()  # get_backend lowercases what it is asked for
    _factories[name] = factory
    _broken.pop(name, None)
    for key in [k for k in _instances if k[0] == name]:
        del _instances[key]


def known_backends() -> list[str]:
    """Names of every backend ndlite knows about, available or not."""
    _discover()
    return sorted(_factories)


class Device:
    """A device as PyTorch names it: `Device("cuda:1")`, `Device("cuda", 1)`, `Device("cpu")`,
    `Device("opencl:0")`; backend names work too ("numpy" is "cpu", "cupy" is "cuda").
    Prints and compares like `torch.device`, also against strings (an index left out on either
    side matches any); making one starts no backend.

    >>> Device("cuda", 1)
    device(type='cuda', index=1)
    >>> str(Device("numpy")), Device("cpu") == "cpu"
    ('cpu', True)
    """

    __slots__ = ("type", "index")

    def __init__(self, type: str | Device, index: int | None = None):  # noqa: A002 - torch's
        if isinstance(type, Device):
            type, index = type.type, type.index if index is None else index
        name, sep, suffix = str(type).strip().lower().partition(":")
        if sep and index is None:
            index = int(suffix) if suffix.strip().isdigit() else suffix.strip()
        self.type = _TYPE_OF.get(name, name)
        self.index = None if self.type == "cpu" else index

    @classmethod
    def of(cls, backend: Backend) -> Device:
        """The device of a backend instance (numpy -> cpu, cupy:0 -> cuda:0)."""
        return cls(backend.name)

    @property
    def backend_spec(self) -> str:
        """The registry's name for it: "numpy", "cupy:1", "opencl:0"."""
        name = ALIASES.get(self.type, self.type)
        return name if self.index is None else f"{name}:{self.index}"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        index = "" if self.index is None else f", index={self.index!r}"
        return f"device(type='{self.type}'{index})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except ValueError:
                return False
        if not isinstance(other, Device):
            return NotImplemented
        same_index = self.index is None or other.index is None or \
            str(self.index) == str(other.index)
        return self.type == other.type and same_index

    def __hash__(self) -> int:
        return hash(self.type)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """`"cupy:1"` -> `("cupy", "1")`; `"numpy"` -> `("numpy", None)`; PyTorch's names map to
    their backends: `"cuda:1"` -> `("cupy", "1")`, `"cpu"` -> `("numpy", None)`."""
    name, sep, device = spec.strip().partition(":")
    name = name.strip().lower()
    device = (device.strip() or None) if sep else None
    if name == "cpu":
        device = None
    return ALIASES.get(name, name), device


def _unknown(name: str) -> BackendUnavailableError:
    known = known_backends()
    close = difflib.get_close_matches(name, known + list(ALIASES), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return BackendUnavailableError(
        name, f"no backend of that name is known ({hint}known: "
              f"{', '.join(known + list(ALIASES))})",
        "check the spelling, or install the package that provides it")


def get_backend(spec: str | Device | Backend | None = None) -> Backend:
    """The backend for `spec` ("numpy", "cupy:1", a Backend), or the current default.

    >>> get_backend("numpy").name
    'numpy'
    """
    if spec is None:
        return current_backend()
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, Device):
        spec = spec.backend_spec
    if not isinstance(spec, str):
        raise TypeError(f"get_backend: expected a backend name, got {type(spec).__name__}")
    name, device = parse_spec(spec)
    if name == "auto":
        return _auto()
    key = (name, device)
    backend = _instances.get(key)
    if backend is not None:
        return backend
    _discover()
    if name not in _factories:
        raise _unknown(name)
    try:
        factory = _load_factory(name)
    except ModuleNotFoundError as exc:
        raise BackendUnavailableError(
            name, f"its package could not be imported ({exc})", INSTALL_HINT.get(name, "")
        ) from exc
    except Exception as exc:  # a broken plugin: report it, never crash discovery
        _broken[name] = f"{type(exc).__name__}: {exc}"
        raise BackendUnavailableError(name, f"its plugin failed to load ({_broken[name]})") from exc
    backend = factory(device)
    if not isinstance(backend, Backend):
        raise TypeError(f"backend factory {name!r} returned {type(backend).__name__}, "
                        "not a Backend")
    _instances[key] = backend
    _instances.setdefault((name, backend.name.partition(":")[2] or None), backend)
    return backend


def _auto() -> Backend:
    tried = []
    for spec in AUTO_ORDER:
        try:
            backend = get_backend(spec)
        except BackendUnavailableError as exc:
            tried.append(f"{spec}: {exc.reason}")
            continue
        print(f"ndlite: NDLITE_BACKEND=auto chose {backend.name} ({backend.device_name()})",
              file=sys.stderr)
        return backend
    raise BackendUnavailableError("auto", "; ".join(tried))


def current_backend() -> Backend:
    """The backend new tensors go to: the innermost `using(...)`, else the default."""
    stack = _local.stack
    if stack:
        return stack[-1]
    global _default
    if _default is None:
        _default = get_backend(os.environ.get(ENV_VAR, "").strip() or "numpy")
    return _default


def set_backend(spec: str | Backend) -> Backend:
    """Make `spec` the default backend for new tensors; returns it.

    >>> import ndlite
    >>> ndlite.set_backend("numpy").name
    'numpy'
    """
    global _default
    _default = get_backend(spec)
    return _default


@contextlib.contextmanager
def using(spec: str | Backend) -> Iterator[Backend]:
    """Within the block, new tensors go to `spec`.

    >>> import ndlite
    >>> with ndlite.using("numpy"):
    ...     ndlite.zeros(2).device
    device(type='cpu')
    """
    backend = get_backend(spec)
    _local.stack.append(backend)
    try:
        yield backend
    finally:
        _local.stack.pop()


def probe(name: str) -> tuple[Backend | None, str]:
    """Try to start backend `name`; returns (backend, "") or (None, why not)."""
    try:
        return get_backend(name), ""
    except BackendUnavailableError as exc:
        return None, exc.reason + (f". Fix: {exc.fix}" if exc.fix else "")
    except Exception as exc:  # noqa: BLE001 - info must list a broken backend, not crash
        return None, f"{type(exc).__name__}: {exc}"


def synchronize(spec: str | Backend | None = None) -> None:
    """Wait for queued work on `spec` (default: every backend started so far)."""
    if spec is not None:
        get_backend(spec).synchronize()
        return
    for backend in set(_instances.values()):
        backend.synchronize()
