"""Making tensors: from data, filled, ranges, and random (seeded, same numbers on every backend).

Every function takes `dtype`, `backend` (PyTorch's `device=` is accepted too) and
`requires_grad`. Random numbers are drawn on the host from one NumPy generator that
`manual_seed` resets, then copied to the backend, so a seed gives the same tensor everywhere.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import bounds
from .device.registry import get_backend
from .dtypes import SUPPORTED, as_dtype, default_float, default_int, is_floating
from .errors import DTypeError, ShapeError
from .tensor import Tensor

_generator = np.random.default_rng(0)
_seed = 0


def manual_seed(seed: int) -> None:
    """Seed every random function (rand, randn, randint, dropout, init, shuffling).

    >>> import ndlite
    >>> ndlite.manual_seed(0); a = ndlite.rand(3)
    >>> ndlite.manual_seed(0); bool((ndlite.rand(3) == a).all())
    True
    """
    global _generator, _seed
    if not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative integer, got {seed!r}")
    _seed = int(seed)
    _generator = np.random.default_rng(_seed)


def initial_seed() -> int:
    return _seed


def generator() -> np.random.Generator:
    """The host generator behind ndlite's random functions (for samplers and data loaders)."""
    return _generator


def rng(generator=None) -> np.random.Generator:
    """The host generator to draw from: that of an `ndlite.Generator`, else the global one."""
    return _generator if generator is None else generator.host


def _backend(backend, device):
    return get_backend(backend if backend is not None else device)


def _finish(data, backend, requires_grad) -> Tensor:
    t = Tensor._make(data, backend)
    if requires_grad:
        t.requires_grad_()
    return t


def _shape(size, op: str) -> tuple:
    """`zeros(2, 3)`, `zeros((2, 3))` and `zeros([2, 3])` all mean shape (2, 3)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = []
    for n in size:
        if isinstance(n, Tensor):
            n = int(n)
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):
            raise TypeError(f"{op}: sizes must be integers, got {size!r}")
        shape.append(int(n))
    if any(n < 0 for n in shape):
        raise ShapeError(f"{op}: negative dimension in shape {tuple(shape)}")
    return tuple(shape)


def _host_dtype(array: np.ndarray, from_python: bool, op: str) -> np.dtype:
    if array.dtype in SUPPORTED:
        if from_python and array.dtype == np.float64:
            return default_float  # Python floats become float32, as in PyTorch
        return array.dtype
    if array.dtype.kind in "iu":
        raise DTypeError(f"{op}: integer dtype {array.dtype} is not supported; pass "
                         f"dtype=ndlite.int64 (or float32) to convert")
    if array.dtype.kind == "f":
        raise DTypeError(f"{op}: {array.dtype} is not supported; pass dtype=ndlite.float32")
    raise DTypeError(f"{op}: cannot make a tensor from data of dtype {array.dtype}")


def tensor(data, dtype=None, backend=None, requires_grad: bool = False, device=None) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, a NumPy array, a number, a tensor).

    Python floats become float32 and ints int64; NumPy arrays keep their dtype.

    >>> import ndlite
    >>> ndlite.tensor([[1, 2], [3, 4]]).dtype
    dtype('int64')
    """
    target = _backend(backend, device)
    if isinstance(data, Tensor):
        src = data.detach().to(target)
        if dtype is not None:
            src = src.to(as_dtype(dtype))
        buffer = target.copy(src._data) if src._data is data._data else src._data
        return _finish(buffer, target, requires_grad)
    from_python = not isinstance(data, (np.ndarray, np.generic))
    try:
        array = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__}: {exc}") from None
    if array.dtype == object:
        raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__} "
                        "(ragged lists, or objects that are not numbers)")
    want = as_dtype(dtype) if dtype is not None else _host_dtype(array, from_python, "tensor")
    if array.dtype != want:
        array = array.astype(want)
    if want not in target.dtypes:
        raise DTypeError(f"tensor: backend {target.name} does not support {want}")
    out = _finish(target.from_numpy(array), target, requires_grad)
    bounds.remember(out, array)  # index checks need not read it back (bounds.py)
    return out


def as_tensor(data, dtype=None, backend=None, device=None) -> Tensor:
    """`data` as a tensor, without copying when it already is one of that dtype and backend."""
    if isinstance(data, Tensor):
        return data.to(_backend(backend, device) if (backend or device) else data._backend,
                       dtype=dtype)
    return tensor(data, dtype=dtype, backend=backend, device=device)


from_numpy = as_tensor


def full(size, fill_value, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    """A tensor of shape `size` filled with `fill_value`.

    >>> import ndlite
    >>> ndlite.full((2,), 7.0).tolist()
    [7.0, 7.0]
    """
    shape = _shape((size,) if isinstance(size, numbers.Integral) else (tuple(size),), "full")
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
        dtype = default_float if is_floating(dtype) else (np.dtype(bool) if dtype.kind == "b"
                                                         else default_int)
    b = _backend(backend, device)
    return _finish(b.full(shape, fill_value, as_dtype(dtype)), b, requires_grad)


def zeros(*size, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    """A tensor of zeros: `zeros(2, 3)` or `zeros((2, 3))`."""
    b = _backend(backend, device)
    return _finish(b.full(_shape(size, "zeros"), 0, as_dtype(dtype)), b, requires_grad)


def ones(*size, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    """A tensor of ones: `ones(2, 3)` or `ones((2, 3))`."""
    b = _backend(backend, device)
    return _finish(b.full(_shape(size, "ones"), 1, as_dtype(dtype)), b, requires_grad)


def empty(*size, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    """An uninitialized tensor (its values are whatever the memory held)."""
    b = _backend(backend, device)
    return _finish(b.empty(_shape(size, "empty"), as_dtype(dtype)), b, requires_grad)


def _like(t: Tensor, dtype, backend, device):
    return (as_dtype(dtype) if dtype is not None else t.dtype,
            _backend(backend, device) if (backend or device) else t._backend)


def zeros_like(t, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    dt, b = _like(t, dtype, backend, device)
    return _finish(b.full(t.shape, 0, dt), b, requires_grad)


def ones_like(t, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    dt, b = _like(t, dtype, backend, device)
    return _finish(b.full(t.shape, 1, dt), b, requires_grad)


def full_like(t, fill_value, dtype=None, backend=None, requires_grad=False, device=None):
    dt, b = _like(t, dtype, backend, device)
    return _finish(b.full(t.shape, fill_value, dt), b, requires_grad)


def empty_like(t, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    dt, b = _like(t, dtype, backend, device)
    return _finish(b.empty(t.shape, dt), b, requires_grad)


def arange(start, end=None, step=1, dtype=None, backend=None, requires_grad=False,
           device=None) -> Tensor:
    """Values from `start` to `end` (exclusive) by `step`: int64 for integer arguments,
    float32 otherwise.

    >>> import ndlite
    >>> ndlite.arange(3).tolist(), ndlite.arange(0, 1, 0.25).tolist()
    ([0, 1, 2], [0.0, 0.25, 0.5, 0.75])
    """
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ShapeError(f"arange: the range from {start} to {end} by {step} goes the wrong way")
    all_int = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    dt = as_dtype(dtype) if dtype is not None else (default_int if all_int else default_float)
    values = np.arange(start, end, step, dtype=np.float64 if not all_int else np.int64)
    b = _backend(backend, device)
    host = values.astype(dt)
    out = _finish(b.from_numpy(host), b, requires_grad)
    bounds.remember(out, host)  # position ids: index checks need not read them back
    return out


def linspace(start, end, steps: int, dtype=None, backend=None, requires_grad=False,
             device=None) -> Tensor:
    """`steps` evenly spaced values from `start` to `end`, both included."""
    if steps < 0:
        raise ShapeError(f"linspace: number of steps must be non-negative, got {steps}")
    b = _backend(backend, device)
    values = np.linspace(start, end, steps, dtype=np.float64).astype(as_dtype(dtype))
    return _finish(b.from_numpy(values), b, requires_grad)


def eye(n: int, m: int | None = None, dtype=None, backend=None, requires_grad=False,
        device=None) -> Tensor:
    """The identity matrix (n x m)."""
    m = n if m is None else m
    _shape((n, m), "eye")
    b = _backend(backend, device)
    return _finish(b.from_numpy(np.eye(n, m, dtype=as_dtype(dtype))), b, requires_grad)


def rand(*size, dtype=None, backend=None, requires_grad=False, device=None,
         generator=None) -> Tensor:
    """Uniform random values in [0, 1)."""
    dt = as_dtype(dtype)
    values = rng(generator).random(_shape(size, "rand"), dtype=dt)
    b = _backend(backend, device)
    return _finish(b.from_numpy(values), b, requires_grad)


def randn(*size, dtype=None, backend=None, requires_grad=False, device=None,
          generator=None) -> Tensor:
    """Standard normal random values."""
    dt = as_dtype(dtype)
    values = rng(generator).standard_normal(_shape(size, "randn"), dtype=dt)
    b = _backend(backend, device)
    return _finish(b.from_numpy(values), b, requires_grad)


def randint(low, high=None, size=(), dtype=None, backend=None, device=None,
            generator=None, requires_grad=False) -> Tensor:
    """Random integers in [low, high): `randint(10, (3,))` or `randint(0, 10, (3,))`."""
    if isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    dt = as_dtype(dtype) if dtype is not None else default_int
    values = rng(generator).integers(low, high, _shape((size,), "randint") if not isinstance(
        size, numbers.Integral) else (size,), dtype=np.int64).astype(dt)
    b = _backend(backend, device)
    return _finish(b.from_numpy(values), b, False)


def rand_like(t, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    dt, b = _like(t, dtype, backend, device)
    return rand(t.shape, dtype=dt, backend=b, requires_grad=requires_grad)


def randn_like(t, dtype=None, backend=None, requires_grad=False, device=None) -> Tensor:
    dt, b = _like(t, dtype, backend, device)
    return randn(t.shape, dtype=dt, backend=b, requires_grad=requires_grad)


def randint_like(t, low, high=None, dtype=None, backend=None, device=None) -> Tensor:
    dt, b = _like(t, dtype, backend, device)
    return randint(low, high, t.shape, dtype=dt, backend=b)


def randperm(n: int, dtype=None, backend=None, device=None, generator=None,
             requires_grad=False) -> Tensor:
    """A random permutation of 0..n-1."""
    b = _backend(backend, device)
    values = rng(generator).permutation(n).astype(as_dtype(dtype) if dtype else default_int)
    return _finish(b.from_numpy(values), b, False)
