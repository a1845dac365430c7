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

import builtins

from . import (
    accelerator,
    amp,
    autograd,
    backends,
    cuda,
    data,
    dtypes,
    graph,
    linalg,
    methods,
    nn,
    optim,
    utils,
)
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .autograd import grad_of as grad
from .autograd import value_and_grad
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
    Device,
    current_backend,
    get_backend,
    known_backends,
    register_backend,
    set_backend,
    synchronize,
    using,
)
from .dtypes import bfloat16, bool_, double, float16, float32, float64, half, int32, int64, long
from .errors import (
    BackendUnavailableError,
    DeviceMismatchError,
    DTypeError,
    KernelBuildError,
    OutOfMemoryError,
    ShapeError,
)
from .grad_mode import inference_mode, is_inference_mode_enabled, no_grad
from .graph import enable_grad, is_grad_enabled, set_grad_enabled
from .interop import from_dlpack
from .ops.activation import erf, log_softmax, softmax
from .ops.binary import (
    add,
    clamp,
    clip,
    eq,
    ge,
    gt,
    le,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    pow,
    sub,
)
from .ops.composite import (
    addcdiv,
    addcmul,
    addmm,
    baddbmm,
    clamp_max,
    clamp_min,
    diag,
    hstack,
    isclose,
    lerp,
    masked_select,
    nan_to_num,
    nonzero,
    repeat_interleave,
    unbind,
    vstack,
)
from .ops.composite_more import (
    bincount,
    bucketize,
    cdist,
    cross,
    diff,
    index_add,
    index_fill,
    kron,
    movedim,
    searchsorted,
    tensordot,
    unique,
)
from .ops.composite_more import movedim as moveaxis
from .ops.einsum import einsum
from .ops.elementwise import clone, where
from .ops.gather import gather, index_select, scatter_add, take
from .ops.join import cat, chunk, concatenate, narrow, pad, split, stack
from .ops.linalg import bmm, dot, matmul, mm
from .ops.losses_more import cosine_similarity
from .ops.math import (
    acos,
    arccos,
    arcsin,
    arctan,
    arctan2,
    asin,
    atan,
    atan2,
    cos,
    cosh,
    erfc,
    exp2,
    expm1,
    isfinite,
    isinf,
    isnan,
    log1p,
    log2,
    log10,
    reciprocal,
    rsqrt,
    sin,
    sinh,
    square,
    tan,
)
from .ops.movement import (
    broadcast_to,
    flatten,
    permute,
    reshape,
    squeeze,
    transpose,
    unflatten,
    unsqueeze,
)
from .ops.recurrent import gru_cell, lstm_cell, rnn_relu_cell, rnn_tanh_cell
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
from .ops.reductions_more import (
    aminmax,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    broadcast_tensors,
    column_stack,
    count_nonzero,
    dstack,
    histc,
    mv,
    nanmean,
    nansum,
    quantile,
    std_mean,
    var_mean,
    vdot,
)
from .ops.rounding import (
    ceil,
    div,
    divide,
    fix,
    floor,
    floor_divide,
    fmod,
    frac,
    remainder,
    round,
    true_divide,
    trunc,
)
from .ops.selection import (
    flip,
    fliplr,
    flipud,
    ger,
    masked_fill,
    meshgrid,
    norm,
    outer,
    repeat,
    roll,
    scatter,
    tile,
    tril,
    triu,
)
from .ops.sorting import argsort, cumprod, cumsum, kthvalue, median, prod, sort, topk
from .ops.unary import abs, exp, log, neg, relu, sigmoid, sign, sqrt, tanh
from .random import Generator, bernoulli, multinomial, normal
from .select import BackendChoice, select_backend
from .serialization import load, save
from .tensor import Tensor

float = float32  # noqa: A001 - torch.float
bool = bool_  # noqa: A001 - torch.bool
int = int32  # noqa: A001 - torch.int


def compile(model=None, **kwargs):  # noqa: A001 - torch.compile
    """PyTorch's torch.compile, accepted for compatibility: returns `model` unchanged (ndlite
    runs eagerly; on CuPy, `ndlite.cuda.capture` records a whole step instead)."""
    if model is None:
        return lambda fn: fn
    return model


def is_tensor(obj) -> bool:
    """Whether obj is an ndlite Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    return input.is_floating_point()


def numel(input: Tensor) -> int:
    return input.numel()


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """|input - other| <= atol + rtol * |other| everywhere (compared on the host)."""
    import numpy as np

    a, b = input.detach().numpy(), other.detach().numpy()
    return builtins.bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input: Tensor, other: Tensor) -> bool:
    """Same shape and the same values."""
    return input.shape == other.shape and builtins.bool((input == other).all().item())


# reductions and scans take axis= as well as dim= (methods.AXIS_ALIASED)
(sum, mean, var, std, max, min, amax, amin, argmax, argmin, logsumexp, all, any, cumsum,
 cumprod, prod, argsort, sort, median) = [methods.axis_alias(f) for f in (
    sum, mean, var, std, max, min, amax, amin, argmax, argmin, logsumexp, all, any, cumsum,
    cumprod, prod, argsort, sort, median)]
