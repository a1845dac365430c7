"""More activation modules, each over the function of the same name in
`ndlite.nn.functional` (ops/activations_more.py): ReLU6, Hardsigmoid, Hardswish, Mish, SELU,
CELU, Softsign, Tanhshrink, Softshrink, Hardshrink, Threshold, GLU, Softmin, Softmax2d, and
PReLU with its learned slope."""

from __future__ import annotations

from ..creation import full
from ..tensor import Tensor
from . import functional as F
from .module import Module, Parameter


def _plain(name: str, fn, doc: str):
    """A module with no settings whose forward is `fn` (an `inplace` flag is accepted, as
    PyTorch's; the result is always a new tensor)."""

    def __init__(self, inplace: bool = False):
        Module.__init__(self)

    def forward(self, input: Tensor) -> Tensor:
        return fn(input)

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "__doc__": doc,
                                  "__module__": __name__})


ReLU6 = _plain("ReLU6", F.relu6, "min(max(x, 0), 6)")
Hardsigmoid = _plain("Hardsigmoid", F.hardsigmoid, "relu6(x + 3) / 6")
Hardswish = _plain("Hardswish", F.hardswish, "x * relu6(x + 3) / 6")
Mish = _plain("Mish", F.mish, "x * tanh(softplus(x))")
SELU = _plain("SELU", F.selu, "scale * elu(x, alpha), self-normalizing")
Softsign = _plain("Softsign", F.softsign, "x / (1 + |x|)")
Tanhshrink = _plain("Tanhshrink", F.tanhshrink, "x - tanh(x)")


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))"""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softshrink(Module):
    """x -+ lambd outside [-lambd, lambd], 0 inside"""

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x outside [-lambd, lambd], 0 inside"""

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)


class Threshold(Module):
    """x where x > threshold, else value"""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value = threshold, value

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class GLU(Module):
    """a * sigmoid(b) over the halves of `dim`"""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """softmax(-x) along dim"""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """softmax over the channels of (N, C, H, W) or (C, H, W) input"""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-D or 4-D input, got shape {input.shape}")
        return F.softmax(input, -3)


class PReLU(Module):
    """x where x > 0, else a * x, with a learned (one, or one per channel), starting at `init`.

    >>> import ndlite
    >>> ndlite.nn.PReLU()(ndlite.tensor([-4.0, 2.0])).tolist()
    [-1.0, 2.0]
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None,
                 backend=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype,
                                     backend=backend if backend is not None else device))

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
