"""The Backend contract: the small set of primitives every device implements.

A backend is an object over its own buffer type (numpy.ndarray, cupy.ndarray, an OpenCL buffer
with shape/strides/offset). Buffers expose `.shape` (a tuple) and `.dtype` (a NumPy dtype).
The core never looks inside a buffer: everything a tensor does goes through these methods.

Required primitives raise NotImplementedError here. Optional fast paths (below them) have
working fallbacks composed from the required primitives, so a new backend only writes the
required part and may override a fast path when it can do better.

Conventions every backend follows (the conformance kit checks them):
- binary primitives accept a buffer or a Python scalar for either operand (never both); a scalar
  takes the other operand's dtype; buffer operands already share one dtype and broadcast
  NumPy-style (the core promotes and checks shapes first);
- `argmax` and max-gradients pick the first maximal element in row-major order;
- `relu` and `sign` follow NumPy at 0 (relu(0) = 0, sign(0) = 0);
- results are bitwise deterministic run to run; no atomics in scatter-like primitives;
- integer division and float→int casts follow NumPy (C truncation for casts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Buffer = Any  # a backend's native array
Scalar = int | float | bool


class Backend:
    """Base class of every backend. Subclasses set `kind` and implement the required primitives.

    Example (the NumPy backend, the reference):

    >>> import ndlite
    >>> b = ndlite.get_backend("numpy")
    >>> b.to_numpy(b.add(b.from_numpy(np.ones(2, np.float32)), 1.0))
    array([2., 2.], dtype=float32)
    """

    #: the registry name of this kind of backend ("numpy", "cupy", "opencl")
    kind: str = "?"
    #: the full name, with device suffix where there is one ("cupy:0", "opencl:1")
    name: str = "?"
    #: dtypes this device supports (float64 only where the hardware has it)
    dtypes: frozenset = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64", "bool"))
    #: whether work is queued and runs asynchronously (to_numpy and synchronize wait)
    asynchronous: bool = False

    # ---- identity and capabilities ---------------------------------------------------------

    def __repr__(self) -> str:
        return self.name

    def device_name(self) -> str:
        """A human-readable name of the device ("NVIDIA H100 80GB HBM3", "CPU (NumPy)")."""
        return self.name

    def info(self) -> dict:
        """What `ndlite info` prints: devices, memory, fp64, library versions."""
        return {"device": self.device_name(), "fp64": np.dtype("float64") in self.dtypes}

    def memory_in_use(self) -> int | None:
        """Bytes this backend holds on its device right now, where it can tell."""
        return None

    # ---- transfer and memory (required) ----------------------------------------------------

    def from_numpy(self, array: np.ndarray) -> Buffer:
        """A device buffer holding a copy of `array` (dtype already supported)."""
        raise NotImplementedError

    def to_numpy(self, x: Buffer) -> np.ndarray:
        """A host copy of `x` (waits for queued work)."""
        raise NotImplementedError

    def full(self, shape: tuple, value: Scalar, dtype: np.dtype) -> Buffer:
        raise NotImplementedError

    def empty(self, shape: tuple, dtype: np.dtype) -> Buffer:
        return self.full(shape, 0, dtype)

    def astype(self, x: Buffer, dtype: np.dtype) -> Buffer:
        """A new buffer with `x` cast to `dtype` (NumPy's unsafe casting rules)."""
        raise NotImplementedError

    def copy(self, x: Buffer) -> Buffer:
        raise NotImplementedError

    def assign(self, dst: Buffer, src: Buffer | Scalar) -> None:
        """Write `src` (broadcast to dst's shape, cast to its dtype) into `dst` in place.
        `dst` may be a view returned by `slice`/`permute`/`reshape`; the write shows in its base."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until all queued work on this device is done."""

    # ---- elementwise (required) ------------------------------------------------------------

    def neg(self, x): raise NotImplementedError
    def exp(self, x): raise NotImplementedError
    def log(self, x): raise NotImplementedError
    def sqrt(self, x): raise NotImplementedError
    def tanh(self, x): raise NotImplementedError
    def sigmoid(self, x): raise NotImplementedError
    def relu(self, x): raise NotImplementedError
    def abs(self, x): raise NotImplementedError
    def sign(self, x): raise NotImplementedError

    def add(self, a, b): raise NotImplementedError
    def sub(self, a, b): raise NotImplementedError
    def mul(self, a, b): raise NotImplementedError
    def div(self, a, b): raise NotImplementedError
    def pow(self, a, b): raise NotImplementedError
    def maximum(self, a, b): raise NotImplementedError
    def minimum(self, a, b): raise NotImplementedError

    def eq(self, a, b): raise NotImplementedError
    def ne(self, a, b): raise NotImplementedError
    def lt(self, a, b): raise NotImplementedError
    def le(self, a, b): raise NotImplementedError
    def gt(self, a, b): raise NotImplementedError
    def ge(self, a, b): raise NotImplementedError

    def where(self, cond: Buffer, a: Buffer | Scalar, b: Buffer | Scalar) -> Buffer:
        """`a` where `cond` (a bool buffer) is true, else `b`; all three broadcast."""
        raise NotImplementedError

    # ---- reductions (required) -------------------------------------------------------------

    def sum(self, x: Buffer, axes: tuple, keepdims: bool) -> Buffer:
        """Sum over `axes`, a tuple of non-negative dims (an empty tuple reduces nothing)."""
        raise NotImplementedError

    def max(self, x: Buffer, axes: tuple, keepdims: bool) -> Buffer:
        raise NotImplementedError

    def min(self, x: Buffer, axes: tuple, keepdims: bool) -> Buffer:
        raise NotImplementedError

    def argmax(self, x: Buffer, axis: int, keepdims: bool) -> Buffer:
        """int64 index of the first maximum along `axis`."""
        raise NotImplementedError

    # ---- linear algebra (required) ---------------------------------------------------------

    def matmul(self, a: Buffer, b: Buffer) -> Buffer:
        """Batched matrix product of two buffers of at least 2 dims; batch dims broadcast."""
        raise NotImplementedError

    # ---- movement (required) ---------------------------------------------------------------

    def reshape(self, x: Buffer, shape: tuple) -> Buffer:
        """`x` with a new shape of the same size; a view where the layout allows."""
        raise NotImplementedError

    def permute(self, x: Buffer, axes: tuple) -> Buffer:
        raise NotImplementedError

    def broadcast_to(self, x: Buffer, shape: tuple) -> Buffer:
        raise NotImplementedError

    def slice(self, x: Buffer, key: tuple) -> Buffer:
        """Basic indexing: `key` holds one entry per leading dim of `x`, each an in-range int
        (the dim is dropped), a slice with normalized start/stop/step (step may be negative) or
        None (a new dim of size 1). Returns a view."""
        raise NotImplementedError

    def pad(self, x: Buffer, widths: tuple, value: Scalar) -> Buffer:
        """Constant padding: `widths` holds (before, after) for every dim, all >= 0."""
        raise NotImplementedError

    def concatenate(self, xs: Sequence[Buffer], axis: int) -> Buffer:
        raise NotImplementedError

    def gather(self, x: Buffer, index: Buffer, axis: int) -> Buffer:
        """`out[..., j, ...] = x[..., index[..., j, ...], ...]` along `axis` (take_along_axis).
        `index` is int64 with x's ndim; its other dims equal x's or are 1 (broadcast).
        Indices are already checked to be in range."""
        raise NotImplementedError

    def scatter_add(self, index: Buffer, values: Buffer, axis: int, size: int) -> Buffer:
        """The adjoint of `gather`: zeros with `values.shape` but `size` along `axis`, then
        `out[..., index[..., j, ...], ...] += values[..., j, ...]`, deterministically."""
        raise NotImplementedError

    def put(self, dst: Buffer, flat_index: Buffer, values: Buffer) -> None:
        """In place: `dst.flat[flat_index[k]] = values[k]` in dst's row-major logical order
        (dst may be a view). With repeated indices, the last write wins."""
        raise NotImplementedError

    # ---- optional fast paths (fallbacks composed from the primitives above) ----------------

    def argmin(self, x: Buffer, axis: int, keepdims: bool) -> Buffer:
        """int64 index of the first minimum along `axis`."""
        if x.dtype == np.dtype(bool):
            return self.argmax(self.eq(x, False), axis, keepdims)
        return self.argmax(self.neg(x), axis, keepdims)
