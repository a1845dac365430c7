"""Containers: Sequential (modules applied in order) and ModuleList (a registered list)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from .activation import ReLU
from .layers import Conv2d
from .module import Module

#: the forwards a Sequential may run as one op (a class patched since is run as it is)
_CONV2D_FORWARD, _RELU_FORWARD = Conv2d.forward, ReLU.forward


def _plain(m, kind, forward) -> bool:
    """Whether module m is a `kind` itself whose forward is `forward`, unpatched, and with no
    forward hooks (which must see the layer's own input and output)."""
    return (m.__class__ is kind and kind.forward is forward and "forward" not in m.__dict__
            and not m._hooked)


class Sequential(Module):
    """Modules applied one after another; built from modules or an OrderedDict of them.

    >>> import ndlite
    >>> net = ndlite.nn.Sequential(ndlite.nn.Linear(4, 8), ndlite.nn.ReLU(), ndlite.nn.Linear(8, 2))
    >>> net(ndlite.ones(3, 4)).shape, len(net), type(net[1]).__name__
    ((3, 2), 3, 'ReLU')
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                if not isinstance(m, Module):
                    raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, not a "
                                    "Module")
                self.add_module(str(i), m)

    def forward(self, input):
        # a Conv2d with a bias and the ReLU after it run as one op (ops/conv.py Conv2dReLU:
        # one backend call and one graph node, the same bits): exact classes with their own
        # forward and no hooks only, so a subclass's or a patched forward, or a hook, is never
        # skipped
        held = None  # a Conv2d waiting to see what follows it
        for m in self._modules.values():
            if held is not None:
                if _plain(m, ReLU, _RELU_FORWARD):
                    input, held = held.forward_relu(input), None
                    continue
                input, held = held(input), None
            if _plain(m, Conv2d, _CONV2D_FORWARD) and m.bias is not None:
                held = m
            else:
                input = m(input)
        return input if held is None else held(input)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index):
        items = list(self._modules.items())
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        return items[index][1]

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters the parent module sees."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index):
        values = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(values[index])
        return values[index]
