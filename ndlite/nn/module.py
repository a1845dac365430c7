"""Module and Parameter: the containers models are built from, PyTorch's API.

A Module registers what is assigned to it: Parameters (trainable leaves), sub-Modules, and
buffers (`register_buffer`: state such as BatchNorm's running statistics). From that it
lists parameters, moves itself between backends and dtypes (in place: optimizers keep their
references), switches train/eval mode, and saves and loads its state as a dict of tensors.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator

import numpy as np

from .. import graph
from ..creation import empty
from ..dtypes import as_dtype
from ..errors import ShapeError
from ..grad_hooks import HookHandle
from ..tensor import Tensor
from . import hooks

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

# Parameters are plain Tensors (the core's fast paths check `type(t) is Tensor`), remembered
# here so that `isinstance(t, Parameter)` can tell them apart.
_PARAMETERS: dict[int, weakref.ref] = {}


class _ParameterType(type):
    def __instancecheck__(cls, obj) -> bool:
        ref = _PARAMETERS.get(id(obj))
        return ref is not None and ref() is obj


class Parameter(metaclass=_ParameterType):
    """A tensor that is a trainable leaf of a Module: `Parameter(tensor)` returns a Tensor
    sharing `tensor`'s memory with requires_grad=True, which Modules register when assigned.

    >>> import ndlite
    >>> p = ndlite.nn.Parameter(ndlite.zeros(2))
    >>> p.requires_grad, isinstance(p, ndlite.nn.Parameter), isinstance(p, ndlite.Tensor)
    (True, True, True)
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Tensor:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a Tensor, got {type(data).__name__}")
        t = Tensor._make(data.buffer, data.backend)
        t._vbox = data._version_box()
        t.requires_grad_(requires_grad)
        key = id(t)
        _PARAMETERS[key] = weakref.ref(t, lambda _, key=key: _PARAMETERS.pop(key, None))
        return t


class Module:
    """Base class of every layer and model: subclasses assign parameters and sub-modules in
    `__init__` and compute in `forward`.

    >>> import ndlite
    >>> class Affine(ndlite.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.scale = ndlite.nn.Parameter(ndlite.ones(3))
    ...     def forward(self, x):
    ...         return x * self.scale
    >>> m = Affine()
    >>> [name for name, _ in m.named_parameters()], m(ndlite.ones(3)).tolist()
    (['scale'], [1.0, 1.0, 1.0])
    """

    training: bool
    # hooks (hooks.py, backward_hooks.py), an OrderedDict on the instance once one is
    # registered, and then _hooked, which sends __call__ through them
    _forward_pre_hooks = _forward_hooks = _backward_pre_hooks = _backward_hooks = None
    _hooked = False

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward method")

    def __call__(self, *args, **kwargs):
        if self._hooked:
            return hooks.call(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> HookHandle:
        """Call `hook(module, args)` before each forward; it may return new args (hooks.py).

        >>> import ndlite
        >>> m = ndlite.nn.Identity()
        >>> handle = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        >>> m(ndlite.ones(2)).tolist()
        [2.0, 2.0]
        """
        return hooks.add(self, "_forward_pre_hooks", hook, (with_kwargs, False), prepend)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> HookHandle:
        """Call `hook(module, args, output)` after each forward; it may return a new output
        (hooks.py). The usual use, keeping a layer's activations:

        >>> import ndlite
        >>> net = ndlite.nn.Sequential(ndlite.nn.Linear(3, 2), ndlite.nn.ReLU())
        >>> seen = {}
        >>> handle = net[0].register_forward_hook(lambda mod, args, out: seen.update(fc=out))
        >>> _ = net(ndlite.ones(4, 3))
        >>> seen["fc"].shape
        (4, 2)
        """
        return hooks.add(self, "_forward_hooks", hook, (with_kwargs, always_call), prepend)

    def register_full_backward_pre_hook(self, hook: Callable,
                                        prepend: bool = False) -> HookHandle:
        """Call `hook(module, grad_output)` when the gradient of the output is known; it may
        return a new grad_output (backward_hooks.py)."""
        return hooks.add(self, "_backward_pre_hooks", hook, (), prepend)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> HookHandle:
        """Call `hook(module, grad_input, grad_output)` when the gradient of the input is
        known; it may return a new grad_input (backward_hooks.py). Grad-CAM's use:

        >>> import ndlite
        >>> layer, seen = ndlite.nn.Linear(3, 2), {}
        >>> h = layer.register_full_backward_hook(lambda m, gi, go: seen.update(go=go[0]))
        >>> layer(ndlite.ones(4, 3)).sum().backward()
        >>> seen["go"].shape
        (4, 2)
        """
        return hooks.add(self, "_backward_hooks", hook, (), prepend)

    register_backward_hook = register_full_backward_hook  # PyTorch's older name

    # ---- registration ------------------------------------------------------------------------

    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() is called")
        params, buffers, modules = self._parameters, self._buffers, self._modules
        if isinstance(value, Parameter) or isinstance(value, Module):
            for table in (params, buffers, modules):
                table.pop(name, None)
            self.__dict__.pop(name, None)
            (params if isinstance(value, Parameter) else modules)[name] = value
        elif name in params or name in modules:
            if value is not None:
                kind = "Parameter" if name in params else "Module"
                raise TypeError(f"cannot assign a {type(value).__name__} as {name!r} of "
                                f"{type(self).__name__} (a {kind} or None is expected)")
            (params if name in params else modules)[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign a {type(value).__name__} as buffer {name!r} "
                                "(a Tensor or None is expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        # only reached when ordinary lookup fails: a forward's self.weight or self.conv1
        d = self.__dict__
        entries = d.get("_parameters")
        if entries is not None and name in entries:
            return entries[name]
        entries = d.get("_buffers")
        if entries is not None and name in entries:
            return entries[name]
        entries = d.get("_modules")
        if entries is not None and name in entries:
            return entries[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Keep `tensor` as state that is not trained (saved in state_dict when persistent)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None, got "
                            f"{type(tensor).__name__}")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None")
        self._parameters[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        self._modules[name] = module

    # ---- traversal ---------------------------------------------------------------------------

    def named_modules(self, prefix: str = "", memo: set | None = None) -> Iterator:
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self) -> Iterator:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator:
        for name, child in self._modules.items():
            if child is not None:
                yield name, child

    def children(self) -> Iterator:
        for _, child in self.named_children():
            yield child

    def _named(self, table: str, prefix: str, recurse: bool) -> Iterator:
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, t in getattr(module, table).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator:
        """(name, parameter) pairs, each parameter once, in registration order."""
        return self._named("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator:
        return self._named("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Callable) -> Module:
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients -----------------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout drops, batch norm uses batch statistics); returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: mode must be a bool, got {mode!r}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        """Evaluation mode: `train(False)`."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = p.grad.detach() * 0

    # ---- moving ------------------------------------------------------------------------------

    def to(self, *args, dtype=None, backend=None, device=None) -> Module:
        """Parameters and buffers moved to another backend and/or floating dtype, in place
        (the same Parameter objects, so an optimizer built before keeps working). Integer
        buffers keep their dtype, as in PyTorch."""
        if any(isinstance(a, np.dtype) for a in args):  # model.to(ndlite.float16)
            dtype = next(a for a in args if isinstance(a, np.dtype))
            args = tuple(a for a in args if not isinstance(a, np.dtype))
        for t in list(self.parameters()) + list(self.buffers()):
            moved = t.detach().to(*args, dtype=dtype if t.is_floating_point() else None,
                                  backend=backend, device=device)
            if moved is not t:
                t.set_(moved)
            if t.grad is not None:
                t.grad = t.grad.to(t.backend, t.dtype)
        return self

    def cuda(self, device=None) -> Module:
        """Parameters and buffers on the CuPy backend (PyTorch's `model.cuda()`)."""
        return self.to("cuda" if device is None else
                       f"cuda:{device}" if isinstance(device, int) else device)

    def cpu(self) -> Module:
        """Parameters and buffers on the NumPy backend."""
        return self.to("cpu")

    def float(self) -> Module:
        return self.to(np.dtype("float32"))

    def double(self) -> Module:
        return self.to(np.dtype("float64"))

    def half(self) -> Module:
        """Floating parameters and buffers in float16 (integer buffers stay as they are)."""
        return self.to(as_dtype("float16"))

    def bfloat16(self) -> Module:
        """Floating parameters and buffers in bfloat16 (needs the ml_dtypes package)."""
        return self.to(as_dtype("bfloat16"))

    # ---- state -------------------------------------------------------------------------------

    def state_dict(self, prefix: str = "") -> OrderedDict:
        """Every parameter and persistent buffer by dotted name (detached, sharing memory)."""
        out = OrderedDict()
        for mod_prefix, module in self.named_modules(prefix.rstrip(".")):
            head = f"{mod_prefix}." if mod_prefix else ""
            for name, p in module._parameters.items():
                if p is not None:
                    out[head + name] = p.detach()
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent:
                    out[head + name] = b.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copy values (tensors or NumPy arrays) into the parameters and buffers of the same
        names. With `strict`, missing or unexpected keys are an error; shapes must match."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict for {type(self).__name__}: missing keys "
                           f"{missing}, unexpected keys {unexpected}")
        for name, target in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            shape = tuple(value.shape)
            if shape != target.shape:
                raise ShapeError(f"load_state_dict for {type(self).__name__}: {name!r} has "
                                 f"shape {shape} in the state dict but {target.shape} in the "
                                 "model")
        for name, target in own.items():
            if name in state_dict:
                value = state_dict[name]
                if not isinstance(value, Tensor):
                    from ..creation import tensor

                    value = tensor(np.asarray(value), backend=target.backend)
                with graph.no_grad():
                    target.copy_(value)
        return IncompatibleKeys(missing, unexpected)

    # ---- printing ----------------------------------------------------------------------------

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) |
                      set(self._modules))

