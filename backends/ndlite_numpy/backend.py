"""The NumPy backend: ndlite on the CPU, and the reference every other backend is checked against.

Everything comes from the shared xp base; this file only makes NumPy's ufuncs return arrays
for 0-d inputs, swaps in NumPy's faster reduction entry points, selects `where` by bit masks
on large operands (np.where branches per element), and plugs in the fast paths of nn.py
(im2col convolution, max pooling over contiguous planes) and the large matmuls of threads.py,
both run on the backend's own threads with their temporaries in scratch.py.
"""

from __future__ import annotations

import math
import os
import platform

import numpy as np

from ndlite.device import Backend, BackendUnavailableError, XpBackend
from ndlite.device.halfmath import compute_in_float32, scalar_in_float32
from ndlite.dtypes import HALF, is_floating

from . import elementwise, kernels, nn, norm, onednn, onednn_gemm, optim, scratch, spread, threads


def _array_ufunc(ufunc, arity: int):
    """`ufunc` made to return an array for 0-d inputs (NumPy would return a scalar there).

    A plain wrapper with a class check is cheaper than `out=...` (NumPy >= 2.3), whose
    keyword parsing costs more than the check on every call. Halves (tested by identity,
    the cheapest test) go by float32 where NumPy's own loops would differ: see halfmath."""
    ndarray, asarray, f16, bf16 = np.ndarray, np.asarray, HALF[0], HALF[-1]
    if arity == 1 and ufunc is np.sign:
        def call(a):
            if a.dtype is f16 or a.dtype is bf16:  # bfloat16's sign keeps -0.0; contract: 0.0
                return asarray(ufunc(a.astype(np.float32)).astype(a.dtype))
            r = ufunc(a)
            return r if r.__class__ is ndarray else asarray(r)
    elif arity == 1:
        def call(a):
            r = ufunc(a)
            return r if r.__class__ is ndarray else asarray(r)
    elif ufunc is np.maximum or ufunc is np.minimum:
        def call(a, b):
            # NumPy's float16 loops return the first operand of a tie of -0.0 and 0.0, its
            # float32 and float64 loops the second (as the contract): float16 goes by float32
            dt = a.dtype if a.__class__ is ndarray else getattr(b, "dtype", None)
            if dt is f16 or dt is bf16:
                return asarray(scalar_in_float32(ufunc, a, b))
            r = ufunc(a, b)
            return r if r.__class__ is ndarray else asarray(r)
    else:
        def call(a, b):
            if a.__class__ is not b.__class__:  # a half with a Python number: by float32
                dt = a.dtype if a.__class__ is ndarray else getattr(b, "dtype", None)
                if dt is f16 or dt is bf16:
                    return asarray(scalar_in_float32(ufunc, a, b))
            r = ufunc(a, b)
            return r if r.__class__ is ndarray else asarray(r)
    call.__name__ = ufunc.__name__
    return call


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _integer_pow(a, b):
    """a ** b for integers with negative exponents somewhere: the truncated real result (1 or
    -1 for a base of 1 or -1, else 0), as the CUDA and OpenCL backends and PyTorch give."""
    r = np.power(a, np.where(b < 0, 0, b))
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 != 0, -1, 1), 0))
    return _array(np.where(b < 0, negative, r).astype(r.dtype))


def _array(r, _ndarray=np.ndarray, _asarray=np.asarray):
    return r if r.__class__ is _ndarray else _asarray(r)


_add_reduce, _max_reduce, _min_reduce = np.add.reduce, np.maximum.reduce, np.minimum.reduce
_maximum, _matmul = np.maximum, np.matmul
_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)

_SAME_WIDTH_INT = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64,
                   np.dtype(np.int32): np.int32, np.dtype(np.int64): np.int64}


def _select_bits(cond, a, b):
    """where(cond, a, b) by selecting bits through a 0 / -1 integer mask: branch-free, so 10x
    faster than np.where on the unpredictable masks of relu and pooling backward, and exact
    (bit for bit, -0.0 and NaN included). None when it does not apply (small or broadcast
    operands, other dtypes): np.where then."""
    if cond.__class__ is not np.ndarray or cond.dtype != np.bool_ or cond.size < 4096:
        return None
    arrays = [v for v in (a, b) if v.__class__ is np.ndarray]
    if not arrays:
        return None
    dtype = arrays[0].dtype
    itype = _SAME_WIDTH_INT.get(dtype)
    if itype is None:
        return None
    bits = []
    for v in (a, b):
        if v.__class__ is np.ndarray:
            if v.dtype != dtype or v.shape != cond.shape:
                return None
            bits.append(v.view(itype))
        elif isinstance(v, float if is_floating(dtype) else int) and not isinstance(v, bool):
            bits.append(np.asarray(v, dtype).view(itype))
        else:
            return None
    mask = cond.view(np.int8).astype(itype)
    np.negative(mask, out=mask)  # true -> all ones, false -> 0
    out = np.bitwise_and(bits[0], mask)
    if bits[1].ndim or bits[1] != 0:  # else the false branch adds only zero bits
        np.bitwise_or(out, np.bitwise_and(bits[1], np.invert(mask, out=mask)), out=out)
    return out.view(dtype)


class NumpyBackend(XpBackend):
    """The reference backend (CPU, NumPy)."""

    kind = "numpy"
    name = "numpy"
    #: half precision is stored in half, computed in float32 and rounded once
    #: (ndlite/device/halfmath.py)
    dtypes = Backend.dtypes | frozenset(HALF)
    #: the batch-norm fast paths (norm.py): methods, so that Backend's own stay the fallbacks
    batch_norm, batch_norm_grad = norm.batch_norm, norm.batch_norm_grad

    def __init__(self, device: str | None = None):
        if device not in (None, "", "0", "cpu"):
            raise BackendUnavailableError(
                "numpy", f"device {device!r} does not exist; the NumPy backend has one device",
                "use NDLITE_BACKEND=numpy",
            )
        super().__init__(np)
        scratch.settle_malloc()
        power = self.pow

        def pow(a, b):  # noqa: A001 - the primitive's name
            try:
                return power(a, b)
            except ValueError:  # an integer to a negative power: NumPy refuses; the contract
                return _integer_pow(np.asarray(a), np.asarray(b))  # (and PyTorch) truncate

        self.pow = pow
        self.add = elementwise.with_bias_add(self.add)  # a convolution's bias (kernel)
        # half buffers: contractions in float32, rounded once (armed by the first half buffer)
        compute_in_float32(self, lazy=True)

    def _array_result(self, ufunc, arity):
        return _array_ufunc(ufunc, arity)

    def device_name(self) -> str:
        return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"

    def info(self) -> dict:
        return {**super().info(), "numpy": np.__version__, "devices": [self.device_name()],
                "threads": threads.describe(), "kernels": kernels.status(),
                "memory_bound_kernels": spread.describe(),
                "onednn": onednn.status()}

    def erf(self, x):
        # math.erf is accurate to float64's last bit; NumPy has no erf ufunc
        return _array(_erf(x).astype(x.dtype, copy=False))

    def relu(self, x):
        # a Python 0 is weak (keeps x's dtype) and cheaper than building a NumPy scalar
        if x.dtype in HALF:
            return self.maximum(x, 0)  # float16's ties of -0.0 and 0 (see _array_ufunc)
        if x.size >= elementwise.MIN_SIZE:
            out = elementwise.relu(x)  # compiled, spread over the threads
            if out is not None:
                return out
        return _array(_maximum(x, 0))

    def relu_grad(self, grad, out):
        if grad.size >= elementwise.MIN_SIZE:
            r = elementwise.relu_grad(grad, out)
            if r is not None:
                return r
        return super().relu_grad(grad, out)

    def matmul(self, a, b):
        if a.size * b.shape[-1] >= threads.BLAS_THREADED:
            out = onednn_gemm.matmul(a, b)  # float32 matrices, where oneDNN is installed
            if out is not None:
                return out
        # A Linear layer at a small batch is x @ W.T with W row-major: OpenBLAS computes that
        # skinny product up to 30% faster as (W @ x.T).T (bench/overhead.py, Linear at batch 4)
        if (b.shape[-1] >= 256 and b.ndim == 2 and a.ndim == 2 and 2 <= a.shape[0] <= 32
                and b.shape[0] >= 256 and b.flags.f_contiguous and not b.flags.c_contiguous):
            return threads.matmul(b.T, a.T).T
        if a.size * b.shape[-1] < threads.BLAS_THREADED:  # one BLAS thread anyway (cheap check)
            return _matmul(a, b)
        return threads.matmul(a, b)

    def to_numpy(self, x):
        # shares memory, like torch's Tensor.numpy() on the CPU
        return x

    def where(self, cond, a, b):
        out = _select_bits(cond, a, b)
        return super().where(cond, a, b) if out is None else out

    # NumPy's ufunc.reduce entry points skip np.sum's Python-level dispatch (2x faster on
    # small arrays); a full reduction's scalar goes back into a 0-d array.
    def sum(self, x, axes, keepdims):
        if x.size >= elementwise.MIN_SIZE and axes:  # a bias gradient: compiled, threads
            out = elementwise.sum_(x, axes, keepdims)
            if out is not None:
                return out
        if x.dtype == _FLOAT32 and axes and x.size >= 256 and (
                axes[-1] != x.ndim - 1 or not x.flags.c_contiguous):
            # NumPy sums pairwise only along a contiguous last axis; along any other its
            # float32 error grows with n (column sums of 2048 x 2048: 1.6e-5). Accumulating
            # in float64 is exact enough for any n a float32 tensor holds, then rounds once.
            return _array(_add_reduce(x, axes, _FLOAT64, None, keepdims).astype(_FLOAT32))
        return _array(_add_reduce(x, axes, None, None, keepdims))

    def max(self, x, axes, keepdims):
        return _array(_max_reduce(x, axes, None, None, keepdims))

    def min(self, x, axes, keepdims):
        return _array(_min_reduce(x, axes, None, None, keepdims))

    # ---- neural-network fast paths (nn.py); geometries nn.py does not cover fall back -----

    def conv2d(self, x, weight, stride, padding, dilation, groups):
        return nn.conv2d(x, weight, stride, padding, dilation, groups)

    def conv2d_grad_input(self, grad_output, weight, input_shape, stride, padding, dilation,
                          groups):
        return nn.conv2d_grad_input(grad_output, weight, input_shape, stride, padding,
                                    dilation, groups)

    def conv2d_grad_weight(self, x, grad_output, weight_shape, stride, padding, dilation,
                           groups):
        return nn.conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation,
                                     groups)

    def max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode):
        out = nn.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)
        if out is None:
            return super().max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)
        return out

    def max_pool2d_grad(self, grad_output, indices, input_shape, kernel_size, stride, padding,
                        dilation, ceil_mode):
        out = nn.max_pool2d_grad(grad_output, indices, input_shape, kernel_size, stride,
                                 padding, dilation, ceil_mode)
        if out is None:
            return super().max_pool2d_grad(grad_output, indices, input_shape, kernel_size,
                                           stride, padding, dilation, ceil_mode)
        return out

    # ---- optimizer steps: fused numba kernels where they apply (optim.py), else the reference

    def adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1,
                  beta2, eps, weight_decay, decoupled_weight_decay):
        args = (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
                weight_decay, decoupled_weight_decay)
        if not optim.adam_step(*args):
            super().adam_step(*args)

    def rmsprop_step(self, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps,
                     momentum, weight_decay):
        args = (param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps, momentum,
                weight_decay)
        if not optim.rmsprop_step(*args):
            super().rmsprop_step(*args)

    def sgd_step(self, param, grad, momentum_buffer, lr, momentum, dampening, nesterov,
                 weight_decay, first_step):
        args = (param, grad, momentum_buffer, lr, momentum, dampening, nesterov, weight_decay,
                first_step)
        if not optim.sgd_step(*args):
            super().sgd_step(*args)
