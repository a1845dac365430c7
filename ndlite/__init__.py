"""ndlite: a small, fast, multi-backend array library with reverse-mode autodiff.

One backend-agnostic core (tensors, autodiff, ops, nn, optimizers, data) runs on NumPy (the
reference), CuPy (CUDA) and OpenCL. Pick a backend with `NDLITE_BACKEND` or `set_backend`.

>>> import ndlite
>>> x = ndlite.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> (x ** 2).sum().backward()
>>> x.grad.tolist()
[2.0, 4.0, 6.0]
"""

__version__ = "0.1.0"

from . import autograd, dtypes
from .autograd import (
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
    value_and_grad,
)
from .autograd import grad_of as grad
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    initial_seed,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .device import (
    Backend,
    current_backend,
    get_backend,
    known_backends,
    register_backend,
    set_backend,
    synchronize,
    using,
)
from .dtypes import bool_, double, float32, float64, int32, int64, long
from .errors import (
    BackendUnavailableError,
    DeviceMismatchError,
    DTypeError,
    KernelBuildError,
    OutOfMemoryError,
    ShapeError,
)
from .ops.elementwise import (
    abs,
    add,
    clamp,
    clip,
    clone,
    div,
    eq,
    exp,
    ge,
    gt,
    le,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    neg,
    pow,
    relu,
    sigmoid,
    sign,
    sqrt,
    sub,
    tanh,
    where,
)
from .ops.indexing import gather, index_select, scatter_add, take
from .ops.linalg import bmm, dot, matmul, mm
from .ops.movement import (
    broadcast_to,
    cat,
    chunk,
    concatenate,
    flatten,
    narrow,
    pad,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    transpose,
    unflatten,
    unsqueeze,
)
from .ops.reduce import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    logsumexp,
    max,
    mean,
    min,
    std,
    sum,
    var,
)
from .tensor import Tensor

float = float32  # noqa: A001 - torch.float
bool = bool_  # noqa: A001 - torch.bool
int = int32  # noqa: A001 - torch.int

from . import data, nn, optim  # noqa: E402  (they build on everything above)
from .interop import from_dlpack  # noqa: E402
from .select import BackendChoice, select_backend  # noqa: E402
from .serialization import load, save  # noqa: E402


def __getattr__(name: str):
    # ndlite.cuda (CUDA graphs) on first use; it imports no CuPy either way
    if name == "cuda":
        import importlib

        return importlib.import_module(".cuda", __name__)
    raise AttributeError(f"module 'ndlite' has no attribute {name!r}")
