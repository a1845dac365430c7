"""More of PyTorch's containers and trivial layers: Identity, ModuleDict, ParameterList,
ParameterDict, and the activation modules of the functional ops added for issue 13 (SiLU, ELU,
Softplus, Hardtanh, LogSigmoid)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..tensor import Tensor
from . import functional as F
from .module import Module, Parameter


class Identity(Module):
    """Returns its input (a placeholder layer); accepts and ignores any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class ModuleDict(Module):
    """A dict of modules whose parameters the parent sees, in insertion order.

    >>> import ndlite
    >>> d = ndlite.nn.ModuleDict({"wte": ndlite.nn.Linear(2, 2)})
    >>> list(d.keys()), len(list(d.parameters()))
    (['wte'], 2)
    """

    def __init__(self, modules: Mapping | Iterable | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            if not isinstance(module, Module):
                raise TypeError(f"ModuleDict: {key!r} is a {type(module).__name__}, not a Module")
            self.add_module(key, module)

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()


def _parameter(value) -> Tensor:
    if isinstance(value, Parameter):
        return value
    if not isinstance(value, Tensor):
        raise TypeError(f"expected a Tensor or Parameter, got {type(value).__name__}")
    return Parameter(value)


class ParameterList(Module):
    """A list of parameters registered with the module that holds it."""

    def __init__(self, values: Iterable | None = None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value) -> ParameterList:
        self.register_parameter(str(len(self._parameters)), _parameter(value))
        return self

    def extend(self, values) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, index: int):
        return list(self._parameters.values())[index]

    def __setitem__(self, index: int, value) -> None:
        key = list(self._parameters)[index]
        self.register_parameter(key, _parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class ParameterDict(Module):
    """A dict of parameters registered with the module that holds it."""

    def __init__(self, parameters: Mapping | Iterable | None = None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return self._parameters[key]

    def __setitem__(self, key: str, value) -> None:
        self.register_parameter(key, _parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def update(self, parameters) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for key, value in pairs:
            self[key] = value


class SiLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()

    def forward(self, input):
        return F.silu(input)


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha

    def forward(self, input):
        return F.elu(input, self.alpha)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)
