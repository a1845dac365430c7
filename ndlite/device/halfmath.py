"""Half precision on a backend whose array module stores float16/bfloat16 but has no fast or
accurate half arithmetic for contractions (NumPy: a float16 matmul has no BLAS path and is
~300x slower than float32; an ml_dtypes bfloat16 sum rounds after every addition).

`compute_in_float32(backend)` wraps the backend's contractions and fused paths once (or at
its first half buffer, `lazy`): a call
whose buffers are half is run on float32 copies and its floating results are rounded to the
half dtype once, which is PyTorch's rule (accumulate in float32, store rounded). Calls in
float32/float64 go straight through, one dtype test later. Elementwise ufuncs are left alone:
NumPy's float16 loops and ml_dtypes' bfloat16 loops already compute in float32 and round once,
which for + - * / sqrt is the correctly rounded half result.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import HALF, float32

#: primitives and fast paths that sum (or otherwise combine many elements) and so must not
#: accumulate in half; every one returns new buffers
CONTRACTIONS = (
    "sum", "matmul", "scatter_add", "erf", "math", "math2", "cumulative",
    "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "max_pool2d_grad",
    "avg_pool2d", "avg_pool2d_grad", "log_softmax", "nll_loss", "nll_loss_grad",
    "embedding_grad", "layer_norm", "layer_norm_grad", "causal_softmax", "causal_softmax_grad",
    "dropout_mask", "batch_norm", "batch_norm_grad",
)
#: reductions that select: NumPy's float16 max/min loops keep the other one of a tie of
#: -0.0 and 0.0 than its float32/float64 loops (the contract's bits)
SELECTIONS = ("max", "min")
#: fused optimizer steps and the in-place scalar add: they update their buffers in place, so
#: the float32 results are written back, rounded once, into the half buffers
IN_PLACE = ("sgd_step", "rmsprop_step", "adam_step", "add_scalar_inplace")
#: results that stay float32, as PyTorch keeps them: layer norm's mean and rstd, batch norm's
#: mean, invstd and var
KEEP_FLOAT32 = {"layer_norm": (1, 2), "batch_norm": (1, 2, 3)}

_F16, _BF16 = HALF[0], HALF[-1]  # tested by identity: the cheapest test on the float32 path
#: argument classes that hold no dtype (getattr on them would raise and catch, ~0.3 us each)
_PLAIN = frozenset({tuple, list, int, float, bool, str, type(None)})


def _half_dtype(values) -> np.dtype | None:
    for v in values:
        if v.__class__ in _PLAIN:
            continue
        dtype = getattr(v, "dtype", v)  # an array's dtype, or a dtype argument itself
        if dtype is _F16 or dtype is _BF16:
            return dtype
    return None


def _up(v):
    if v is _F16 or v is _BF16:
        return float32
    dtype = getattr(v, "dtype", None)
    if dtype is _F16 or dtype is _BF16:
        return v.astype(float32)
    return v


def _down(out, half: np.dtype, keep=()):
    if isinstance(out, tuple):
        return tuple(o if i in keep else _down(o, half) for i, o in enumerate(out))
    if getattr(out, "dtype", None) == float32:
        return out.astype(half)
    return out


def in_float32(fn, name: str):
    """`fn` run on float32 copies of its half buffers, its float results rounded once."""
    keep = KEEP_FLOAT32.get(name, ())
    in_place = name in IN_PLACE

    def call(*args, **kwargs):
        half = _half_dtype(args) or (_half_dtype(kwargs.values()) if kwargs else None)
        if half is None:
            return fn(*args, **kwargs)
        up_args = [_up(a) for a in args]
        up_kwargs = {k: _up(v) for k, v in kwargs.items()}
        out = fn(*up_args, **up_kwargs)
        if in_place:
            pairs = [*zip(args, up_args), *((kwargs[k], up_kwargs[k]) for k in kwargs)]
            for original, wide in pairs:
                if wide is not original and hasattr(original, "shape"):
                    original[...] = wide.astype(original.dtype)
        return _down(out, half, keep)

    call.__name__ = call.__qualname__ = name
    call.__wrapped__ = fn
    return call


def scalar_in_float32(ufunc, a, b):
    """`ufunc(a, b)` for a half array and a Python number, as PyTorch computes it: the
    number in float32 (not rounded to the half first, as NumPy's float16 does; ml_dtypes'
    bfloat16 would even return float32), the result rounded once to the half. Also any
    binary ufunc on halves that must go by float32 (NumPy's float16 maximum on signed zeros)."""
    half = _half_dtype((a, b))
    r = ufunc(_up(a), _up(b))
    return r.astype(half) if r.dtype.kind == "f" else r  # a float64 NumPy scalar widens


def native_half(method):
    """Mark a backend method that computes halves itself (a kernel with a float accumulator):
    `compute_in_float32` leaves it alone."""
    method.native_half = True
    return method


#: the primitives that make new buffers of a given dtype: the first half one arms the wrappers
CREATORS = ("from_numpy", "astype", "full", "empty")


def compute_in_float32(backend, names=CONTRACTIONS + SELECTIONS + IN_PLACE,
                       lazy: bool = False) -> None:
    """Wrap `backend`'s methods `names` with `in_float32`, as instance attributes (not those
    marked `native_half`). With `lazy`, the wrappers go in when the backend first makes a
    half buffer (CREATORS), so a program that never uses halves never pays their dtype test
    (about 0.3 us a call, a third of a small NumPy sum)."""
    if not lazy:
        _install(backend, names)
        return
    own = {name: vars(backend).get(name) for name in CREATORS}

    def watching(make):
        def create(*args, **kwargs):
            out = make(*args, **kwargs)
            dtype = getattr(out, "dtype", None)
            if dtype is _F16 or dtype is _BF16:
                for name, fn in own.items():  # the creators as they were: nothing to watch
                    if fn is None:
                        vars(backend).pop(name, None)
                    else:
                        setattr(backend, name, fn)
                _install(backend, names)
            return out

        return create

    for name in CREATORS:
        setattr(backend, name, watching(getattr(backend, name)))


def _install(backend, names) -> None:
    for name in names:
        method = getattr(backend, name)
        if not getattr(method, "native_half", False):
            setattr(backend, name, in_float32(method, name))
