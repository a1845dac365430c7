"""Tensor: a backend buffer plus autograd metadata.

A tensor holds `_data` (its backend's native array), `_backend`, and for autograd `_node`
(the op that made it, None for leaves), `_rg` (requires grad), `grad`, and `_vbox`, a version
counter shared with its views that in-place ops bump. Everything a tensor computes is an op
from `ndlite.ops`; the method table at the bottom of this file binds them as methods and
operators, PyTorch-style.
"""

from __future__ import annotations

import numpy as np

from . import autograd
from .device.protocol import Backend
from .device.registry import get_backend
from .dtypes import as_dtype
from .errors import DTypeError, ShapeError


class Tensor:
    """An n-dimensional array on a backend, with reverse-mode autodiff.

    >>> import ndlite
    >>> x = ndlite.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad.tolist()
    [[2.0, 4.0], [6.0, 8.0]]
    """

    __slots__ = ("_data", "_backend", "_node", "_rg", "grad", "_vbox", "_hooks", "__weakref__")
    __array_priority__ = 1000  # numpy_array + tensor calls Tensor.__radd__

    def __init__(self, data, dtype=None, backend=None, requires_grad: bool = False):
        from .creation import tensor

        t = tensor(data, dtype=dtype, backend=backend)
        self._data, self._backend = t._data, t._backend
        self._node, self._rg, self.grad, self._vbox, self._hooks = None, False, None, None, None
        if requires_grad:
            self.requires_grad_()

    @staticmethod
    def _make(data, backend, node=None, requires_grad=False) -> Tensor:
        """Wrap a backend buffer (no copy, no checks): the constructor ops use."""
        t = _new(Tensor)
        t._data = data
        t._backend = backend
        t._node = node
        t._rg = requires_grad
        t.grad = None
        t._vbox = None
        t._hooks = None
        return t

    # ---- what it is ----------------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self._data.shape

    def size(self, dim: int | None = None):
        """The shape, or the size of one dim (torch.Tensor.size)."""
        if dim is None:
            return self._data.shape
        return self._data.shape[_dim(dim, self.ndim, "size")]

    @property
    def ndim(self) -> int:
        return len(self._data.shape)

    def dim(self) -> int:
        return len(self._data.shape)

    def numel(self) -> int:
        n = 1
        for s in self._data.shape:
            n *= s
        return n

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def backend(self):
        """The Backend object this tensor lives on."""
        return self._backend

    @property
    def buffer(self):
        """The backend's native array behind this tensor (no copy): for optimizers, layers
        and interop that call backend primitives directly."""
        return self._data

    @property
    def device(self) -> str:
        """Where the tensor lives, as a backend spec: "numpy", "cupy:0", "opencl:1"."""
        return self._backend.name

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    # ---- autograd metadata ---------------------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set whether autograd records ops on this leaf; returns self."""
        if self._node is not None:
            if not requires_grad:
                raise RuntimeError(
                    "requires_grad_: you can only change requires_grad of leaf tensors; "
                    "use .detach() to get a tensor outside the graph")
            return self
        if requires_grad and self._data.dtype.kind != "f":
            raise DTypeError(
                f"requires_grad_: only floating tensors can require gradients, not "
                f"{self._data.dtype} (shape {self.shape})")
        self._rg = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        """The graph node that produced this tensor (None for leaves)."""
        return self._node

    def detach(self) -> Tensor:
        """The same data, outside the graph (shares memory and version counter)."""
        t = Tensor._make(self._data, self._backend)
        t._vbox = self._version_box()
        return t

    def detach_(self) -> Tensor:
        self._node, self._rg = None, False
        return self

    def register_post_accumulate_grad_hook(self, hook):
        """Call `hook(self)` each time backward has accumulated a gradient into this leaf's
        `.grad` (torch.Tensor.register_post_accumulate_grad_hook). Returns a handle whose
        `remove()` unregisters it.

        >>> import ndlite
        >>> w = ndlite.ones(2, requires_grad=True)
        >>> seen = []
        >>> handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
        >>> (w * 3).sum().backward()
        >>> seen
        [[3.0, 3.0]]
        """
        if self._node is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors have "
                               "their gradient accumulated; use retain_grad on a non-leaf")
        if not self._rg:
            raise RuntimeError("register_post_accumulate_grad_hook: the tensor does not "
                               "require grad")
        if self._hooks is None:
            self._hooks = {}
        return autograd.HookHandle(self._hooks, hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in `.grad` after backward."""
        if self._node is None and not self._rg:
            raise RuntimeError("retain_grad: the tensor does not require grad")
        autograd.retain(self)

    def backward(self, gradient=None, retain_graph: bool | None = None,
                 create_graph: bool = False) -> None:
        """Accumulate the gradient of this tensor into `.grad` of every leaf that requires it."""
        autograd.backward(self, gradient, retain_graph, create_graph)

    @property
    def data(self) -> Tensor:
        """The values, detached (torch's `.data`)."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        if value.shape != self.shape or value.dtype != self.dtype:
            raise ShapeError(f"data: cannot set data of shape {value.shape} {value.dtype} on a "
                             f"tensor of shape {self.shape} {self.dtype}")
        self._data = value._data

    def _version_box(self) -> list:
        box = self._vbox
        if box is None:
            box = self._vbox = [0]
        return box

    @property
    def _version(self) -> int:
        return self._version_box()[0]

    # ---- getting values out --------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (shares memory on the NumPy backend)."""
        if self._rg:
            raise RuntimeError("numpy: can't call numpy() on a tensor that requires grad; "
                               "use tensor.detach().numpy()")
        return self._backend.to_numpy(self._data)

    def __array__(self, dtype=None, copy=None):
        out = self.detach().numpy()
        return out.astype(dtype, copy=False) if dtype is not None else out

    def item(self):
        """The single value as a Python number."""
        if self.numel() != 1:
            raise ShapeError(f"item: only one-element tensors can be converted to a Python "
                             f"scalar, got shape {self.shape}")
        return self._backend.to_numpy(self._data).reshape(()).item()

    def tolist(self):
        return self._backend.to_numpy(self._data).tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is "
                               f"ambiguous (shape {self.shape}); use .any() or .all()")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self) -> int:
        if not self._data.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if not self._data.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        values = self._backend.to_numpy(self._data)
        integral = values.dtype.kind != "f" or not values.size or bool(
            np.all(np.isfinite(values) & (values == np.round(values))))
        # like torch: "1., 2." for whole numbers, else four decimals
        body = np.array2string(values, separator=", ", prefix="tensor(", threshold=1000,
                               precision=4, floatmode="maxprec" if integral else "fixed")
        extras = []
        if self._backend.name != "numpy":
            extras.append(f"device='{self._backend.name}'")
        if values.dtype not in (np.dtype("float32"), np.dtype("int64"), np.dtype("bool")) or \
                values.size == 0:
            extras.append(f"dtype={values.dtype}")
        if self._node is not None:
            extras.append(f"grad_fn={self._node!r}")
        elif self._rg:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body, *extras]) + ")"

    # ---- moving between backends and dtypes ----------------------------------------------

    def to(self, *args, dtype=None, backend=None, device=None, copy: bool = False) -> Tensor:
        """Another backend and/or dtype: `t.to("cupy")`, `t.to(ndlite.float64)`,
        `t.to("opencl", ndlite.float32)`. Differentiable; returns self when nothing changes."""
        for arg in args:
            if isinstance(arg, (str, Backend)):
                backend = arg
            else:
                dtype = arg
        target = get_backend(backend if backend is not None else device) \
            if (backend is not None or device is not None) else self._backend
        out = self
        if target is not self._backend:
            out = _e.transfer(out, target)
        if dtype is not None and as_dtype(dtype) != out.dtype:
            out = _e.astype(out, as_dtype(dtype))
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> Tensor:
        """This tensor on the NumPy backend."""
        return self.to("numpy")

    def cuda(self, device: int | None = None) -> Tensor:
        """This tensor on the CuPy backend."""
        return self.to("cupy" if device is None else f"cupy:{device}")

    def float(self) -> Tensor:
        return self.to(np.dtype("float32"))

    def double(self) -> Tensor:
        return self.to(np.dtype("float64"))

    def long(self) -> Tensor:
        return self.to(np.dtype("int64"))

    def int(self) -> Tensor:
        return self.to(np.dtype("int32"))

    def bool(self) -> Tensor:
        return self.to(np.dtype("bool"))

    def type(self, dtype=None):
        if dtype is None:
            return f"ndlite.{self._data.dtype}"
        return self.to(dtype)

    # ---- in-place ------------------------------------------------------------------------

    def _bump(self) -> None:
        box = self._vbox
        if box is None:
            self._vbox = [1]
        else:
            box[0] += 1

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def fill_(self, value) -> Tensor:
        return _ip.fill_(self, value)

    def copy_(self, src) -> Tensor:
        return _ip.copy_(self, src)


def _dim(dim: int, ndim: int, op: str) -> int:
    """`dim` normalized to 0..ndim-1, or an error naming the op."""
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ShapeError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dims "
                         f"(expected -{max(ndim, 1)}..{max(ndim, 1) - 1})")
    return dim % max(ndim, 1)


_new = object.__new__
autograd.Tensor = Tensor


# ---- the method table: operators and methods are the ops of ndlite.ops -------------------------
# (imported here, after the class, because the ops themselves build Tensors)

from .ops import elementwise as _e  # noqa: E402
from .ops import indexing as _i  # noqa: E402
from .ops import inplace as _ip  # noqa: E402
from .ops import linalg as _l  # noqa: E402
from .ops import movement as _m  # noqa: E402
from .ops import reduce as _r  # noqa: E402


def _swap(fn):
    return lambda a, b: fn(b, a)


_METHODS = {
    # arithmetic and comparison operators (reflected forms swap the operands)
    "__add__": _e.add, "__radd__": _e.add, "__sub__": _e.sub, "__rsub__": _e.rsub,
    "__mul__": _e.mul, "__rmul__": _e.mul, "__truediv__": _e.div, "__rtruediv__": _e.rdiv,
    "__pow__": _e.pow, "__rpow__": _e.rpow, "__matmul__": _l.matmul, "__rmatmul__": _l.rmatmul,
    "__neg__": _e.neg, "__abs__": _e.abs, "__pos__": lambda x: x,
    "__eq__": _e.eq, "__ne__": _e.ne, "__lt__": _e.lt, "__le__": _e.le, "__gt__": _e.gt,
    "__ge__": _e.ge,
    "__and__": _e.logical_and, "__rand__": _e.logical_and, "__or__": _e.logical_or,
    "__ror__": _e.logical_or, "__xor__": _e.logical_xor, "__rxor__": _e.logical_xor,
    "__invert__": _e.logical_not,
    "__iadd__": _ip.add_, "__isub__": _ip.sub_, "__imul__": _ip.mul_, "__itruediv__": _ip.div_,
    "__getitem__": _i.getitem, "__setitem__": _i.setitem,
    # elementwise
    "add": _e.add, "sub": _e.sub, "mul": _e.mul, "div": _e.div, "pow": _e.pow,
    "neg": _e.neg, "exp": _e.exp, "log": _e.log, "sqrt": _e.sqrt, "tanh": _e.tanh,
    "sigmoid": _e.sigmoid, "relu": _e.relu, "abs": _e.abs, "sign": _e.sign,
    "maximum": _e.maximum, "minimum": _e.minimum, "clamp": _e.clamp, "clip": _e.clamp,
    "eq": _e.eq, "ne": _e.ne, "lt": _e.lt, "le": _e.le, "gt": _e.gt, "ge": _e.ge,
    "logical_and": _e.logical_and, "logical_or": _e.logical_or, "logical_not": _e.logical_not,
    "where": lambda self, cond, other: _e.where(cond, self, other),
    "astype": _e.astype, "clone": _e.clone,
    # reductions
    "sum": _r.sum, "mean": _r.mean, "var": _r.var, "std": _r.std, "max": _r.max,
    "min": _r.min, "amax": _r.amax, "amin": _r.amin, "argmax": _r.argmax, "argmin": _r.argmin,
    "logsumexp": _r.logsumexp, "all": _r.all, "any": _r.any,
    # linear algebra
    "matmul": _l.matmul, "mm": _l.mm, "bmm": _l.bmm, "dot": _l.dot,
    # movement
    "reshape": _m.reshape, "view": _m.view, "flatten": _m.flatten, "unflatten": _m.unflatten,
    "squeeze": _m.squeeze, "unsqueeze": _m.unsqueeze, "permute": _m.permute,
    "transpose": _m.transpose, "t": _m.t, "expand": _m.expand, "expand_as": _m.expand_as,
    "broadcast_to": _m.broadcast_to, "split": _m.split, "chunk": _m.chunk, "narrow": _m.narrow,
    "gather": _i.gather, "index_select": _i.index_select,
    # in place
    "add_": _ip.add_, "sub_": _ip.sub_, "mul_": _ip.mul_, "div_": _ip.div_, "pow_": _ip.pow_,
    "clamp_": _ip.clamp_, "neg_": _ip.neg_, "relu_": _ip.relu_,
}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
Tensor.T = property(_m.t)
Tensor.mT = property(_m.matrix_transpose)


def _contiguous(self) -> Tensor:
    """Self (ndlite keeps layouts internal to each backend)."""
    return self


Tensor.contiguous = _contiguous


# DLPack (ndlite/interop.py): np/torch/cupy.from_dlpack(t) share a tensor's memory
from . import interop as _interop  # noqa: E402  (it needs Tensor defined)

Tensor.__dlpack__ = _interop.dlpack
Tensor.__dlpack_device__ = _interop.dlpack_device
