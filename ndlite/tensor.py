"""Tensor: a backend buffer plus autograd metadata.

A tensor holds `_data` (its backend's native array), `_backend`, and for autograd `_node`
(the op that made it, None for leaves), `_rg` (requires grad), `grad`, `_vbox` (a version
counter shared with its views that in-place ops bump) and `_hooks`. This class holds the data
structure only: everything a tensor computes is an op of `ndlite.ops`, bound as methods and
operators in one place once the ops are loaded (ndlite/methods.py), so this module imports
nothing above the autograd engine.
"""

from __future__ import annotations

import numpy as np

from . import bounds, graph
from .device.registry import Device
from .dtypes import is_floating
from .errors import DTypeError, ShapeError
from .grad_hooks import HookHandle


class Tensor:
    """An n-dimensional array on a backend, with reverse-mode autodiff.

    >>> import ndlite
    >>> x = ndlite.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad.tolist()
    [[2.0, 4.0], [6.0, 8.0]]
    """

    __slots__ = ("_data", "_backend", "_node", "_rg", "grad", "_vbox", "_hooks", "_grad_hooks",
                 "_view", "_views", "__weakref__")
    __array_priority__ = 1000  # numpy_array + tensor calls Tensor.__radd__

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
        t._hooks = t._grad_hooks = None
        t._view = None  # for a view: (its base, the view steps from the base); ops/views.py
        t._views = None  # for a base: weak references to its views
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
    def device(self) -> Device:
        """Where the tensor lives, as PyTorch names it: device(type='cpu') for the NumPy
        backend, 'cuda:0', 'opencl:1'; compares equal to those strings and to backend names."""
        return Device.of(self._backend)

    def is_floating_point(self) -> bool:
        return is_floating(self._data.dtype)

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
        if requires_grad and not is_floating(self._data.dtype):
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

    def register_hook(self, hook):
        """Call `hook(grad)` with this tensor's whole gradient each time backward computes it;
        a returned tensor (same shape, dtype and backend) replaces it from there on
        (torch.Tensor.register_hook; grad_hooks.py). Returns a handle whose `remove()`
        unregisters it.

        >>> import ndlite
        >>> x = ndlite.ones(2, requires_grad=True)
        >>> y = x * 3
        >>> handle = y.register_hook(lambda grad: grad * 10)
        >>> y.sum().backward()
        >>> x.grad.tolist()
        [30.0, 30.0]
        """
        if not self._rg:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that does "
                               "not require grad")
        if not callable(hook):
            raise TypeError(f"register_hook: a hook must be callable, got "
                            f"{type(hook).__name__}")
        node = self._node
        if node is None:  # a leaf keeps its own
            if self._grad_hooks is None:
                self._grad_hooks = {}
            return HookHandle(self._grad_hooks, hook)
        if node.hooks is None:  # a non-leaf's live on the node that made it
            node.hooks = {}
        return HookHandle(node.hooks, hook)

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
        return HookHandle(self._hooks, hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in `.grad` after backward."""
        if self._node is None and not self._rg:
            raise RuntimeError("retain_grad: the tensor does not require grad")
        graph.retain(self)

    @property
    def data(self) -> Tensor:
        """The values, detached (torch's `.data`)."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        if value.shape != self.shape or value.dtype != self.dtype:
            raise ShapeError(f"data: cannot set data of shape {value.shape} {value.dtype} on a "
                             f"tensor of shape {self.shape} {self.dtype}")
        bounds.forget(value)  # (one memory, two version counters: bounds.py trusts neither)
        bounds.forget(self)
        self._data = value._data

    def set_(self, source: Tensor) -> Tensor:
        """Make this tensor use `source`'s memory, backend, shape and dtype (torch's
        `Tensor.set_`): how `Module.to` moves parameters while keeping the same objects."""
        bounds.forget(source)
        bounds.forget(self)
        self._data, self._backend = source._data, source._backend
        return self

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
        out = self.numpy()  # like torch: refused for a tensor that requires grad
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
        integral = not is_floating(values.dtype) or not values.size or bool(
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

    def _bump(self) -> None:
        box = self._vbox
        if box is None:
            self._vbox = [1]
        else:
            box[0] += 1


def _dim(dim: int, ndim: int, op: str) -> int:
    """`dim` normalized to 0..ndim-1, or an error naming the op."""
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ShapeError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dims "
                         f"(expected -{max(ndim, 1)}..{max(ndim, 1) - 1})")
    return dim % max(ndim, 1)


_new = object.__new__
