"""Tensor's methods and operators, bound in one place once every op is loaded.

ndlite/tensor.py holds the data structure only; what a tensor computes is an op of
ndlite.ops, and this table makes each one a method or operator, PyTorch-style
(`x + y`, `x.sum()`, `x.to("cupy")`, `x.backward()`). Importing ndlite runs it once.
"""

from __future__ import annotations

from . import autograd
from . import random as _random
from .creation import full as make_full
from .creation import tensor as make_tensor
from .device.protocol import Backend
from .device.registry import Device, get_backend
from .dtypes import as_dtype
from .ops import activation as _act
from .ops import binary as _b
from .ops import cast as _c
from .ops import composite as _cp
from .ops import composite_more as _cm
from .ops import elementwise as _e
from .ops import gather as _g
from .ops import indexing as _i
from .ops import inplace as _ip
from .ops import inplace_more as _ipm
from .ops import join as _j
from .ops import linalg as _l
from .ops import math as _mt
from .ops import movement as _m
from .ops import reduce as _r
from .ops import reductions_more as _rm
from .ops import rounding as _rd
from .ops import selection as _sl
from .ops import sorting as _so
from .ops import unary as _u
from .tensor import Tensor


def _init(self, data, dtype=None, backend=None, requires_grad: bool = False):
    """Tensor(data, dtype=None, backend=None, requires_grad=False): like ndlite.tensor."""
    t = make_tensor(data, dtype=dtype, backend=backend)
    self._data, self._backend = t._data, t._backend
    self._node, self._rg, self.grad, self._vbox, self._hooks = None, False, None, None, None
    self._grad_hooks = None
    self._view = self._views = None
    if requires_grad:
        self.requires_grad_()


def to(self, *args, dtype=None, backend=None, device=None, copy: bool = False,
       non_blocking: bool = False, memory_format=None) -> Tensor:
    """Another backend and/or dtype: `t.to("cupy")`, `t.to(ndlite.float64)`,
    `t.to("opencl", ndlite.float32)`, PyTorch's `t.to("cuda")`, `t.to(other_tensor)`.
    Differentiable; returns self when nothing changes."""
    for arg in args:
        if isinstance(arg, (str, Backend, Device)):
            backend = arg
        elif isinstance(arg, Tensor):
            backend, dtype = arg._backend, arg.dtype
        else:
            dtype = arg
    where = backend if backend is not None else device
    target = get_backend(where) if where is not None else self._backend
    out = self
    if target is not self._backend:
        out = _c.transfer(out, target)
    if dtype is not None and as_dtype(dtype) != out.dtype:
        out = _c.astype(out, as_dtype(dtype))
    if copy and out is self:
        out = _e.clone(self)
    return out


def _cuda(self, device=None) -> Tensor:
    """This tensor on the CuPy backend (`device`: an index, "cuda:1" or a Device)."""
    if device is None or isinstance(device, int):
        return self.to("cupy" if device is None else f"cupy:{device}")
    return self.to(device)


def _type(self, dtype=None):
    if dtype is None:
        return f"ndlite.{self._data.dtype}"
    return self.to(dtype)


def _cast_to(name: str):
    # resolved at the call: without ml_dtypes, `t.bfloat16()` raises a DTypeError naming it
    return lambda self: self.to(as_dtype(name))


def _contiguous(self, memory_format=None) -> Tensor:
    """self where its elements lie in row-major order in memory, else a row-major copy (so
    `.view()` works after it, as PyTorch's `x.transpose(1, 2).contiguous().view(...)`)."""
    if self.ndim <= 1:
        return self
    flat = _m.reshape(self, (self.numel(),))
    return self if flat._view is not None else _m.reshape(flat, self.shape)


def _is_contiguous(self, memory_format=None) -> bool:
    """Whether `self.view(-1)` would need no copy: contiguous() gives self back."""
    with autograd.no_grad():
        return _contiguous(self) is self


def _new(fill):
    """`t.new_zeros(size)` and friends: a new tensor on t's backend with t's dtype (or
    `dtype=`), as in PyTorch."""

    def make(self, *size, fill_value=None, dtype=None, device=None, requires_grad=False):
        if fill is None:  # new_full(size, fill_value)
            size, fill_value = (size[0], size[1]) if len(size) == 2 else (size[0], fill_value)
        value = fill if fill is not None else fill_value
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        return make_full(tuple(size), value, dtype=dtype or self.dtype,
                         backend=device or self._backend, requires_grad=requires_grad)

    return make


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False) -> Tensor:
    return make_tensor(data, dtype=dtype or self.dtype, backend=device or self._backend,
                       requires_grad=requires_grad)


def _type_as(self, other: Tensor) -> Tensor:
    return self.to(other.dtype)


def _view_as(self, other: Tensor) -> Tensor:
    return _m.view(self, other.shape)


def _format(self, spec: str) -> str:
    """f"{loss:.4f}" formats a 0-d tensor's value; other tensors format their str."""
    if self.ndim == 0:
        return format(self.item(), spec)
    return format(str(self), spec)


def axis_alias(fn):
    """`fn` that also takes NumPy's `axis=` / `keepdims=` for PyTorch's `dim=` / `keepdim=`
    (as torch's argument parser does)."""

    def call(*args, axis=None, keepdims=None, **kwargs):
        if axis is not None:
            kwargs["dim"] = axis
        if keepdims is not None:
            kwargs["keepdim"] = keepdims
        return fn(*args, **kwargs)

    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    call.__wrapped__ = fn
    return call


#: the reductions and scans that accept axis= as well as dim=
AXIS_ALIASED = ("sum", "mean", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin",
                "logsumexp", "all", "any", "cumsum", "cumprod", "prod", "argsort", "sort",
                "median")

METHODS = {
    # construction, moving, casting
    "__init__": _init, "to": to, "cpu": lambda self: self.to("cpu"), "cuda": _cuda,
    "float": _cast_to("float32"), "double": _cast_to("float64"), "long": _cast_to("int64"),
    "half": _cast_to("float16"), "bfloat16": _cast_to("bfloat16"),
    "int": _cast_to("int32"), "bool": _cast_to("bool"), "type": _type,
    "astype": _c.astype, "clone": _e.clone, "contiguous": _contiguous,
    "is_contiguous": _is_contiguous, "pin_memory": lambda self: self,
    "is_pinned": lambda self: False,
    "backward": autograd.backward,
    # arithmetic and comparison operators (reflected forms swap the operands)
    "__add__": _b.add, "__radd__": _b.add, "__sub__": _b.sub, "__rsub__": _b.rsub,
    "__mul__": _b.mul, "__rmul__": _b.mul, "__truediv__": _b.div, "__rtruediv__": _b.rdiv,
    "__pow__": _b.pow, "__rpow__": _b.rpow, "__matmul__": _l.matmul, "__rmatmul__": _l.rmatmul,
    "__neg__": _u.neg, "__abs__": _u.abs, "__pos__": lambda x: x,
    "__eq__": _b.eq, "__ne__": _b.ne, "__lt__": _b.lt, "__le__": _b.le, "__gt__": _b.gt,
    "__ge__": _b.ge,
    "__and__": _b.and_, "__rand__": _b.and_, "__or__": _b.or_, "__ror__": _b.or_,
    "__xor__": _b.xor_, "__rxor__": _b.xor_, "__invert__": _b.invert,
    "__iadd__": _ip.add_, "__isub__": _ip.sub_, "__imul__": _ip.mul_, "__itruediv__": _ip.div_,
    "__getitem__": _i.getitem, "__setitem__": _i.setitem,
    # elementwise
    "add": _b.add, "sub": _b.sub, "mul": _b.mul, "div": _b.div, "pow": _b.pow,
    "neg": _u.neg, "exp": _u.exp, "log": _u.log, "sqrt": _u.sqrt, "tanh": _u.tanh,
    "sigmoid": _u.sigmoid, "relu": _u.relu, "abs": _u.abs, "sign": _u.sign,
    "maximum": _b.maximum, "minimum": _b.minimum, "clamp": _b.clamp, "clip": _b.clamp,
    "eq": _b.eq, "ne": _b.ne, "lt": _b.lt, "le": _b.le, "gt": _b.gt, "ge": _b.ge,
    "logical_and": _b.logical_and, "logical_or": _b.logical_or, "logical_not": _b.logical_not,
    "where": lambda self, cond, other: _e.where(cond, self, other),
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
    "broadcast_to": _m.broadcast_to, "split": _j.split, "chunk": _j.chunk, "narrow": _j.narrow,
    "gather": _g.gather, "index_select": _g.index_select,
    # in place
    "add_": _ip.add_, "sub_": _ip.sub_, "mul_": _ip.mul_, "div_": _ip.div_, "pow_": _ip.pow_,
    "clamp_": _ip.clamp_, "neg_": _ip.neg_, "relu_": _ip.relu_,
    "fill_": _i.fill_, "copy_": _i.copy_, "zero_": lambda self: _i.fill_(self, 0),
    # PyTorch's creation and likeness methods
    "new_zeros": _new(0), "new_ones": _new(1), "new_empty": _new(0), "new_full": _new(None),
    "new_tensor": _new_tensor, "type_as": _type_as, "view_as": _view_as,
    # more elementwise math (issue 13)
    **{name: getattr(_mt, name) for name in (
        "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "arcsin", "arccos",
        "arctan", "atan2", "arctan2", "log1p", "expm1", "log2", "log10", "exp2", "erfc",
        "isnan", "isinf", "isfinite", "square", "reciprocal", "rsqrt")},
    **{name: getattr(_rd, name) for name in (
        "floor", "ceil", "round", "trunc", "fix", "frac", "fmod", "remainder", "floor_divide",
        "div", "divide", "true_divide")},
    # sorting, scans, shape and selection (issue 13)
    **{name: getattr(_so, name) for name in (
        "sort", "argsort", "topk", "kthvalue", "median", "cumsum", "cumprod", "prod")},
    **{name: getattr(_sl, name) for name in (
        "tril", "triu", "masked_fill", "masked_fill_", "repeat", "tile", "roll", "flip",
        "fliplr", "flipud", "outer", "ger", "norm", "scatter", "scatter_", "scatter_add",
        "scatter_add_")},
    "tril_": lambda self, diagonal=0: _i.copy_(self, _sl.tril(self, diagonal)),
    "triu_": lambda self, diagonal=0: _i.copy_(self, _sl.triu(self, diagonal)),
    # PyTorch's composite functions and more in-place methods (ops/composite.py)
    "softmax": _act.softmax, "log_softmax": _act.log_softmax, "erf": _act.erf,
    **{name: getattr(_cp, name) for name in (
        "lerp", "addmm", "baddbmm", "addcmul", "addcdiv", "clamp_min", "clamp_max", "unbind",
        "diag", "repeat_interleave", "nonzero", "isclose", "nan_to_num", "masked_select")},
    **_ipm.UNARY, "lerp_": _ipm.lerp_, "addcmul_": _ipm.addcmul_, "addcdiv_": _ipm.addcdiv_,
    "clamp_min_": _ipm.clamp_min_, "clamp_max_": _ipm.clamp_max_,
    "nan_to_num_": _ipm.nan_to_num_,
    "element_size": lambda self: self._data.dtype.itemsize,
    **{name: getattr(_cm, name) for name in (
        "movedim", "diff", "cross", "kron", "unfold", "index_add", "index_fill", "unique",
        "bincount")},
    "moveaxis": _cm.movedim,
    **{name: getattr(_rm, name) for name in (
        "nansum", "nanmean", "count_nonzero", "aminmax", "quantile", "histc")},
    "index_add_": lambda self, dim, index, source, *, alpha=1: _i.copy_(
        self, _cm.index_add(self, dim, index, source, alpha=alpha)),
    "index_fill_": lambda self, dim, index, value: _i.copy_(
        self, _cm.index_fill(self, dim, index, value)),
    "__format__": _format,
    "__floordiv__": _rd.floor_divide, "__rfloordiv__": lambda a, b: _rd.floor_divide(b, a),
    "__mod__": _rd.remainder, "__rmod__": lambda a, b: _rd.remainder(b, a),
}


def bind() -> None:
    """Set every entry of METHODS on Tensor (run once, when ndlite is imported)."""
    METHODS.update(_random.METHODS)
    for name in AXIS_ALIASED:
        METHODS[name] = axis_alias(METHODS[name])
    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(_m.t)
    Tensor.nbytes = property(lambda self: self._data.dtype.itemsize * self.numel())
    Tensor.mT = property(_m.matrix_transpose)


bind()
