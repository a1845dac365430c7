"""An out-of-tree ndlite backend, complete in one file: the worked example of
docs/writing-a-backend.md.

It runs on the CPU through NumPy, but keeps its own buffer type (`Array`), so nothing in
ndlite can rely on a buffer being an ndarray; and like many GPUs it has no float64, so the
conformance kit skips float64 cases and says why. It implements exactly the 30 required
primitives of `ndlite.device.Backend` (`protocol.REQUIRED`) and nothing else: the derived
primitives (sigmoid, minimum, le, copy, pad, ...) and the fast paths (conv2d, pooling,
log_softmax, the optimizer steps) come from their fallbacks, composed from these.

ndlite finds it through the entry point in pyproject.toml:

    [project.entry-points."ndlite.backends"]
    example = "ndlite_example:ExampleBackend"

>>> import numpy as np, ndlite
>>> b = ExampleBackend()
>>> b.to_numpy(b.add(b.from_numpy(np.ones(2, np.float32)), 1.0)).tolist()
[2.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from ndlite.device import Backend, BackendUnavailableError


class Array:
    """A buffer: a NumPy array (possibly a view) behind a shape and a dtype."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray):
        self.data = data

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def __repr__(self) -> str:
        return f"Array({self.data!r})"


def _raw(x):
    """The NumPy array behind a buffer; a Python scalar as it is."""
    return x.data if isinstance(x, Array) else x


def _dtype_of(a, b):
    """The dtype of a binary op's result: the buffer operand's (a scalar takes it)."""
    return a.dtype if isinstance(a, Array) else b.dtype


def _wrap(value, dtype=None) -> Array:
    value = np.asarray(value)
    if dtype is not None and value.dtype != dtype:
        value = value.astype(dtype)
    return Array(value)


class ExampleBackend(Backend):
    """float32/int32/int64/bool on the CPU, through NumPy, with buffers of its own."""

    kind = "example"
    name = "example"
    dtypes = frozenset(np.dtype(t) for t in ("float32", "int32", "int64", "bool"))

    def __init__(self, device: str | None = None):
        if device not in (None, "", "0"):
            raise BackendUnavailableError("example", f"device {device!r} does not exist",
                                          "use NDLITE_BACKEND=example")

    def device_name(self) -> str:
        return "CPU (the ndlite_example backend)"

    # ---- transfer and memory -----------------------------------------------------------

    def from_numpy(self, array):
        return Array(np.array(array, copy=True, order="C"))

    def to_numpy(self, x):
        return np.array(x.data, copy=True)

    def full(self, shape, value, dtype):
        return Array(np.full(shape, value, dtype=dtype))

    def astype(self, x, dtype):
        return Array(x.data.astype(dtype))

    def assign(self, dst, src):
        np.copyto(dst.data, _raw(src), casting="unsafe")  # dst may be a view: writes show

    # ---- elementwise ---------------------------------------------------------------------

    def _unary(self, fn, x):
        return _wrap(fn(x.data), x.dtype)

    def neg(self, x): return self._unary(np.negative, x)
    def exp(self, x): return self._unary(np.exp, x)
    def log(self, x): return self._unary(np.log, x)
    def sqrt(self, x): return self._unary(np.sqrt, x)
    def tanh(self, x): return self._unary(np.tanh, x)

    def _binary(self, fn, a, b):
        return _wrap(fn(_raw(a), _raw(b)), _dtype_of(a, b))

    def add(self, a, b): return self._binary(np.add, a, b)
    def sub(self, a, b): return self._binary(np.subtract, a, b)
    def mul(self, a, b): return self._binary(np.multiply, a, b)
    def div(self, a, b): return self._binary(np.true_divide, a, b)
    def pow(self, a, b): return self._binary(np.power, a, b)
    def maximum(self, a, b): return self._binary(np.maximum, a, b)

    def _compare(self, fn, a, b):
        return _wrap(fn(_raw(a), _raw(b)))

    def eq(self, a, b): return self._compare(np.equal, a, b)
    def lt(self, a, b): return self._compare(np.less, a, b)

    def where(self, cond, a, b):
        return _wrap(np.where(cond.data, _raw(a), _raw(b)), _dtype_of(a, b))

    # ---- reductions ----------------------------------------------------------------------

    def sum(self, x, axes, keepdims):
        return _wrap(np.sum(x.data, axis=axes, keepdims=keepdims), x.dtype)

    def max(self, x, axes, keepdims):
        return _wrap(np.max(x.data, axis=axes, keepdims=keepdims))

    def argmax(self, x, axis, keepdims):
        return _wrap(np.argmax(x.data, axis=axis, keepdims=keepdims), np.int64)

    # ---- linear algebra ------------------------------------------------------------------

    def matmul(self, a, b):
        return _wrap(np.matmul(a.data, b.data))

    # ---- movement: views where NumPy gives views, so assign/put write through -----------

    def reshape(self, x, shape):
        return Array(x.data.reshape(shape))

    def permute(self, x, axes):
        return Array(x.data.transpose(axes))

    def broadcast_to(self, x, shape):
        return Array(np.broadcast_to(x.data, shape))

    def slice(self, x, key):
        return Array(x.data[(*key, Ellipsis)])  # Ellipsis: an all-int key stays a 0-d view

    def gather(self, x, index, axis):
        return Array(np.take_along_axis(x.data, index.data, axis=axis))

    def scatter_add(self, index, values, axis, size):
        shape = list(values.shape)
        shape[axis] = size
        out = np.zeros(shape, dtype=values.dtype)
        index = np.broadcast_to(index.data, values.shape)
        where = [np.arange(n).reshape([n if e == d else 1 for e in range(len(shape))])
                 for d, n in enumerate(values.shape)]
        where[axis] = index
        np.add.at(out, tuple(where), values.data)  # in index order: deterministic
        return Array(out)

    def put(self, dst, flat_index, values):
        np.put(dst.data, flat_index.data, values.data)
