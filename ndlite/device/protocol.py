"""The Backend contract: a required core of 30 primitives, and optional methods with defaults.

A backend is an object over its own buffer type (numpy.ndarray, cupy.ndarray, an OpenCL buffer
with shape/strides/offset). Buffers expose `.shape` (a tuple) and `.dtype` (a NumPy dtype).
The core never looks inside a buffer: everything a tensor does goes through these methods, and
it calls each one by name (`backend.add(a, b)`), so an override is a plain method.

The methods fall in four tables, listed explicitly below (tests check that they cover the class):
- REQUIRED: raise NotImplementedError here; a new backend writes these and nothing else;
- DERIVED: primitives composed *exactly* from the required ones in this class (`gt(a, b)` is
  `lt(b, a)`); a backend overrides one only to be faster, and its override gives the same bits;
- FAST_PATHS: neural-network and optimizer ops whose fallbacks (fallbacks.py and, for the
  transformer ones, transformer_fallbacks.py, for batch norm norm_fallbacks.py, for small
  step ops step_fallbacks.py; also their specification) are slow compositions;
  an override agrees within the tolerance policy (bitwise for selections such as max-pool
  indices), and is itself bitwise reproducible;
- CAPABILITIES: what a backend can do beyond computing (wait for its queue, report memory, defer
  a host check into a recorded graph, say if a reshape copied), with defaults that do nothing;
  CUDA graphs (cupy's `graph_recorder`) are one outside the tables: docs/cuda.md.

Conventions every backend follows (the conformance kit checks them):
- binary primitives take a buffer or a Python scalar for either operand (never both); a scalar
  takes the other's dtype; buffers share one dtype and broadcast NumPy-style (checked first);
- on bool buffers `maximum` is logical or, `mul` logical and; `maximum` returns its second operand
  on a tie (maximum(0.0, -0.0) is -0.0) and the NaN operand (the first of two), as NumPy's does;
- `argmax` and max-gradients pick the first maximal element in row-major order; `relu` and
  `sign` follow NumPy at 0 (relu(-0.0) = 0.0, sign(-0.0) = 0.0);
- results are bitwise deterministic run to run; no atomics in scatter-like primitives; integer
  division and float→int casts follow NumPy (C truncation for casts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import fallbacks, hostmath, special
from . import norm_fallbacks as nfb
from . import step_fallbacks as sfb
from . import transformer_fallbacks as tfb

Buffer = Any  # a backend's native array
Scalar = int | float | bool

#: what every backend implements (30)
REQUIRED = (
    "from_numpy", "to_numpy", "full", "astype", "assign",
    "neg", "exp", "log", "sqrt", "tanh",
    "add", "sub", "mul", "div", "pow", "maximum", "eq", "lt", "where",
    "sum", "max", "argmax", "matmul",
    "reshape", "permute", "broadcast_to", "slice", "gather", "scatter_add", "put",
)
#: primitives composed exactly from the required ones (overrides must give the same bits)
DERIVED = (
    "empty", "copy",
    "sigmoid", "relu", "abs", "sign", "minimum", "ne", "le", "gt", "ge",
    "min", "argmin", "pad", "concatenate",
)
#: fast paths with fallbacks in fallbacks.py (overrides agree within the tolerance policy)
FAST_PATHS = (
    "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "erf", "max_pool2d", "max_pool2d_grad",
    "avg_pool2d", "avg_pool2d_grad", "log_softmax", "nll_loss", "nll_loss_grad", "adam_steps",
    "sgd_step", "rmsprop_step", "adam_step", "math", "math2", "argsort", "cumulative",
    "embedding_grad", "layer_norm", "layer_norm_grad", "causal_softmax", "causal_softmax_grad",
    "dropout_mask", "dropout", "linear", "gelu", "gelu_grad", "batch_norm", "batch_norm_grad",
    "batch_norm_update", "relu_grad", "add_scalar_inplace", "sgd_steps", "rmsprop_steps",
    "conv2d_bias", "linear_grad", "log_softmax_grad",
)
#: queries and abilities beyond computing, with defaults that do nothing
CAPABILITIES = ("device_name", "info", "memory_in_use", "synchronize", "defer_host_check",
                "shares_memory")
#: everything a backend may leave to this class
OPTIONAL = DERIVED + FAST_PATHS + CAPABILITIES


class Backend(tfb.TransformerPaths, nfb.NormPaths, sfb.StepPaths):
    """Base class of every backend. Subclasses set `kind` and implement REQUIRED.

    Example (the NumPy backend, the reference):

    >>> import ndlite
    >>> b = ndlite.get_backend("numpy")
    >>> b.to_numpy(b.add(b.from_numpy(np.ones(2, np.float32)), 1.0))
    array([2., 2.], dtype=float32)
    """

    #: the registry name of this kind of backend ("numpy", "cupy", "opencl")
    kind: str = "?"
    #: the full name, with device suffix where there is one ("cupy:0", "opencl:1")
    name: str = "?"
    #: dtypes this device supports (float64 only where the hardware has it)
    dtypes: frozenset = frozenset(
        np.dtype(t) for t in ("float32", "float64", "int32", "int64", "bool"))
    #: whether work is queued and runs asynchronously (to_numpy and synchronize wait)
    asynchronous: bool = False

    # ---- identity (capabilities with defaults) ---------------------------------------------

    def __repr__(self) -> str: return self.name

    # a human-readable name of the device ("NVIDIA H100 80GB HBM3", "CPU (NumPy)"), and what
    # `ndlite info` prints: devices, memory, fp64, library versions
    def device_name(self) -> str: return self.name

    def info(self) -> dict:
        return {"device": self.device_name(), "fp64": np.dtype("float64") in self.dtypes}

    def memory_in_use(self) -> int | None: return None  # bytes held on the device, if known
    def shares_memory(self, a: Buffer, b: Buffer) -> bool:  # may `a` view b's memory (did
        return True  # `reshape` copy?): views for autograd

    # ---- transfer and memory ---------------------------------------------------------------

    def from_numpy(self, array: np.ndarray) -> Buffer:
        """A device buffer holding a copy of `array` (dtype already supported)."""
        raise NotImplementedError

    def to_numpy(self, x: Buffer) -> np.ndarray:  # a host copy (waits for queued work)
        raise NotImplementedError

    def full(self, shape: tuple, value: Scalar, dtype: np.dtype) -> Buffer:
        raise NotImplementedError

    def astype(self, x: Buffer, dtype: np.dtype) -> Buffer:
        """A new buffer (even for x's own dtype): `x` cast to `dtype` (NumPy's unsafe casts)."""
        raise NotImplementedError

    def assign(self, dst: Buffer, src: Buffer | Scalar) -> None:
        """Write `src` (broadcast to dst's shape, cast to its dtype) into `dst` in place.
        `dst` may be a view returned by `slice`/`permute`/`reshape`; the write shows in its base."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until all queued work on this device is done (by default nothing to wait)."""

    # derived: a buffer whose values are not used (here zeros), a new buffer with x's values
    def empty(self, shape: tuple, dtype: np.dtype) -> Buffer: return self.full(shape, 0, dtype)
    def copy(self, x: Buffer) -> Buffer: return self.astype(x, x.dtype)

    # ---- elementwise -----------------------------------------------------------------------

    def neg(self, x): raise NotImplementedError
    def exp(self, x): raise NotImplementedError
    def log(self, x): raise NotImplementedError
    def sqrt(self, x): raise NotImplementedError
    def tanh(self, x): raise NotImplementedError

    def add(self, a, b): raise NotImplementedError
    def sub(self, a, b): raise NotImplementedError
    def mul(self, a, b): raise NotImplementedError
    def div(self, a, b): raise NotImplementedError
    def pow(self, a, b): raise NotImplementedError
    def maximum(self, a, b): raise NotImplementedError

    def eq(self, a, b): raise NotImplementedError
    def lt(self, a, b): raise NotImplementedError

    def where(self, cond: Buffer, a: Buffer | Scalar, b: Buffer | Scalar) -> Buffer:
        """`a` where `cond` (a bool buffer) is true, else `b`; all three broadcast."""
        raise NotImplementedError

    # derived (fallbacks.py): exact compositions of the primitives above. sigmoid goes through
    # exp(-|x|), which never overflows; abs and sign map -0.0 to 0.0 as NumPy's do (abs also
    # clears a NaN's sign bit); relu(-0.0) = maximum(-0.0, 0) = 0.0, as a tie gives the second
    # operand; minimum is maximum on the order reversed (-x, or -1 - x for integers).

    def sigmoid(self, x): return fallbacks.sigmoid(self, x)
    def relu(self, x): return self.maximum(x, 0)
    def abs(self, x): return fallbacks.absolute(self, x)
    def sign(self, x): return fallbacks.sign(self, x)
    def minimum(self, a, b): return fallbacks.minimum(self, a, b)
    def ne(self, a, b): return self.eq(self.eq(a, b), False)
    def le(self, a, b): return self.maximum(self.lt(a, b), self.eq(a, b))
    def gt(self, a, b): return self.lt(b, a)
    def ge(self, a, b): return self.le(b, a)

    # fast paths: math by name (hostmath.py: the names, and fallbacks through the host)
    def math(self, name, x): return hostmath.unary(self, name, x)
    def math2(self, name, a, b): return hostmath.binary(self, name, a, b)
    def argsort(self, x, axis, descending): return hostmath.argsort(self, x, axis, descending)
    def cumulative(self, name, x, axis): return hostmath.cumulative(self, name, x, axis)

    # ---- reductions ------------------------------------------------------------------------

    def sum(self, x: Buffer, axes: tuple, keepdims: bool) -> Buffer:
        """Sum over `axes`, a tuple of non-negative dims (an empty tuple reduces nothing)."""
        raise NotImplementedError

    def max(self, x: Buffer, axes: tuple, keepdims: bool) -> Buffer:
        raise NotImplementedError

    def argmax(self, x: Buffer, axis: int, keepdims: bool) -> Buffer:
        """int64 index of the first maximum along `axis`."""
        raise NotImplementedError

    # derived: max on the order reversed (see fallbacks.minimum); the int64 index of the first
    # minimum along `axis`
    def min(self, x, axes, keepdims): return fallbacks.amin(self, x, axes, keepdims)
    def argmin(self, x, axis, keepdims): return fallbacks.argmin(self, x, axis, keepdims)

    # ---- linear algebra --------------------------------------------------------------------

    def matmul(self, a: Buffer, b: Buffer) -> Buffer:
        """Batched matrix product of two buffers of at least 2 dims; batch dims broadcast."""
        raise NotImplementedError

    def linear(self, x: Buffer, weight: Buffer, bias: Buffer) -> Buffer:
        """x (..., K) @ weight (O, K)^T + bias (O,): Linear's forward. A backend may add the
        bias in the product (one rounding, within the contraction tolerance). Fallback: this."""
        return self.add(self.matmul(x, self.permute(weight, (1, 0))), bias)

    # ---- movement --------------------------------------------------------------------------

    def reshape(self, x: Buffer, shape: tuple) -> Buffer:
        """`x` with a new shape of the same size; a view where the layout allows."""
        raise NotImplementedError

    def permute(self, x: Buffer, axes: tuple) -> Buffer:
        raise NotImplementedError

    def broadcast_to(self, x: Buffer, shape: tuple) -> Buffer:
        raise NotImplementedError

    def slice(self, x: Buffer, key: tuple) -> Buffer:
        """Basic indexing: `key` holds one entry per leading dim of `x`, each an in-range int
        (the dim is dropped), a slice with normalized start/stop/step (step may be negative) or
        None (a new dim of size 1). Returns a view."""
        raise NotImplementedError

    # derived: constant padding (`widths` holds (before, after) for every dim, all >= 0), and
    # buffers of one dtype whose shapes differ only along `axis`, joined
    def pad(self, x: Buffer, widths: tuple, value: Scalar) -> Buffer:
        return fallbacks.pad(self, x, widths, value)
    def concatenate(self, xs: Sequence[Buffer], axis: int) -> Buffer:
        return fallbacks.concatenate(self, xs, axis)

    def gather(self, x: Buffer, index: Buffer, axis: int) -> Buffer:
        """`out[..., j, ...] = x[..., index[..., j, ...], ...]` along `axis` (take_along_axis).
        `index` is int64 with x's ndim; its other dims equal x's or are 1 (broadcast).
        Indices are already checked to be in range."""
        raise NotImplementedError

    def scatter_add(self, index: Buffer, values: Buffer, axis: int, size: int) -> Buffer:
        """The adjoint of `gather`: zeros with `values.shape` but `size` along `axis`, then
        `out[..., index[..., j, ...], ...] += values[..., j, ...]`, deterministically."""
        raise NotImplementedError

    def put(self, dst: Buffer, flat_index: Buffer, values: Buffer) -> None:
        """In place: `dst.flat[flat_index[k]] = values[k]` in dst's row-major logical order
        (dst may be a view). With repeated indices, the last write wins."""
        raise NotImplementedError

    # ---- fast paths for neural networks ----------------------------------------------------
    # Fallbacks live in fallbacks.py (composed from the primitives; they are the specification).
    # Conventions shared by all of them:
    # - images are NCHW; a weight is (O, C // groups, kh, kw);
    # - kernel_size, stride, padding and dilation are (h, w) pairs of ints, already checked:
    #   kernel_size, stride, dilation >= 1, padding >= 0 (symmetric zero padding: the op pads
    #   asymmetric 'same' cases itself), and every output size >= 1;
    # - gradients are gathered per input element in a fixed order: deterministic, no atomics;
    # - results are new buffers (or views) of the input's dtype; inputs are never written,
    #   except by the optimizer steps, which update their `param` and state buffers in place.

    def conv2d(self, x: Buffer, weight: Buffer, stride: tuple, padding: tuple,
               dilation: tuple, groups: int) -> Buffer:
        """2-D cross-correlation, PyTorch's conv2d without bias:
        `out[n, o, i, j] = sum_{c, p, q} x_padded[n, g*Cg + c, i*sh + p*dh, j*sw + q*dw]
        * weight[o, c, p, q]` with g = o // (O // groups), Cg = C // groups.
        Shapes: x (N, C, H, W), weight (O, C // groups, kh, kw) -> (N, O, OH, OW),
        OH = (H + 2 ph - dh (kh - 1) - 1) // sh + 1 (likewise OW).
        Fallback: im2col (strided views of the padded input) + one batched matmul."""
        return fallbacks.conv2d(self, x, weight, stride, padding, dilation, groups)

    def conv2d_grad_input(self, grad_output: Buffer, weight: Buffer, input_shape: tuple,
                          stride: tuple, padding: tuple, dilation: tuple,
                          groups: int) -> Buffer:
        """The gradient of conv2d with respect to x: (N, C, H, W) = `input_shape`.
        grad_output is (N, O, OH, OW). Input elements no window reaches (when the strides do
        not divide evenly) get 0. Fallback: weight^T @ grad_output, then col2im (each kernel
        offset adds into a strided view of the padded result, in row-major offset order)."""
        return fallbacks.conv2d_grad_input(self, grad_output, weight, input_shape, stride,
                                           padding, dilation, groups)

    def conv2d_grad_weight(self, x: Buffer, grad_output: Buffer, weight_shape: tuple,
                           stride: tuple, padding: tuple, dilation: tuple,
                           groups: int) -> Buffer:
        """The gradient of conv2d with respect to the weight: (O, C // groups, kh, kw) =
        `weight_shape`, summed over the batch. Fallback: grad_output @ im2col(x)^T per image,
        summed over images."""
        return fallbacks.conv2d_grad_weight(self, x, grad_output, weight_shape, stride,
                                            padding, dilation, groups)

    def max_pool2d(self, x: Buffer, kernel_size: tuple, stride: tuple, padding: tuple,
                   dilation: tuple, ceil_mode: bool) -> tuple:
        """2-D max pooling of a float x (N, C, H, W): returns (values, indices), both
        (N, C, OH, OW); indices are int64 positions `h * W + w` in the unpadded input plane
        (PyTorch's convention). The padding is -inf and never wins. A tie goes to the first
        maximal element of the window in row-major order (smallest kernel row, then column).
        OH = pool_output_size(H, kh, sh, ph, dh, ceil_mode) (fallbacks.py: with ceil_mode the
        last window may run past the input, but starts inside it or its left padding)."""
        return fallbacks.max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode)

    def max_pool2d_grad(self, grad_output: Buffer, indices: Buffer, input_shape: tuple,
                        kernel_size: tuple, stride: tuple, padding: tuple, dilation: tuple,
                        ceil_mode: bool) -> Buffer:
        """The gradient of max_pool2d: (N, C, H, W) = `input_shape`, where each input element
        sums grad_output over the windows whose index points at it. The geometry is given so
        a device can gather per input element over just the windows covering it. Fallback:
        scatter_add along the flattened plane (itself deterministic)."""
        return fallbacks.max_pool2d_grad(self, grad_output, indices, input_shape, kernel_size,
                                         stride, padding, dilation, ceil_mode)

    def avg_pool2d(self, x: Buffer, kernel_size: tuple, stride: tuple, padding: tuple,
                   ceil_mode: bool, count_include_pad: bool) -> Buffer:
        """2-D average pooling of x (N, C, H, W) -> (N, C, OH, OW) (pool sizes as in
        max_pool2d, dilation 1). Each window's sum is divided by
        `fallbacks.avg_pool2d_divisor`: with count_include_pad the window's size clipped to
        the padded input, else the number of input elements in it (PyTorch's rule)."""
        return fallbacks.avg_pool2d(self, x, kernel_size, stride, padding, ceil_mode,
                                    count_include_pad)

    def avg_pool2d_grad(self, grad_output: Buffer, input_shape: tuple, kernel_size: tuple,
                        stride: tuple, padding: tuple, ceil_mode: bool,
                        count_include_pad: bool) -> Buffer:
        """The gradient of avg_pool2d: (N, C, H, W) = `input_shape`; each input element
        gathers grad_output / divisor over the windows covering it."""
        return fallbacks.avg_pool2d_grad(self, grad_output, input_shape, kernel_size, stride,
                                         padding, ceil_mode, count_include_pad)

    def erf(self, x: Buffer) -> Buffer:  # float64-accurate (CUDA's, OpenCL's; special.erf)
        return special.erf(self, x)

    def log_softmax(self, x: Buffer, axis: int) -> Buffer:
        """`x - max - log(sum(exp(x - max)))` along `axis` (a non-negative dim), float only.
        Fallback: exactly that formula from the primitives."""
        return fallbacks.log_softmax(self, x, axis)

    def nll_loss(self, input: Buffer, target: Buffer, ignore_index: int,
                 reduction: str) -> Buffer:
        """The unweighted negative log-likelihood of int64 labels `target` (N,) under
        log-probabilities `input` (N, C): loss_i = -input[i, target_i], 0 where target_i ==
        ignore_index. reduction "none" gives the (N,) losses, "sum" their sum, "mean" the sum
        over the count of labels not ignored (0-d results). Labels are already checked.
        Fallback: gather at the labels (ignored ones read class 0) times 0/1, then sums."""
        return fallbacks.nll_loss(self, input, target, ignore_index, reduction)

    def nll_loss_grad(self, grad_output: Buffer, target: Buffer, classes: int,
                      ignore_index: int, reduction: str) -> Buffer:
        """The gradient of nll_loss with respect to its input: (N, classes), 0 except at
        (i, target_i) for labels not ignored, where it is -g_i (g_i = grad_output[i] for
        "none", the 0-d grad_output for "sum", it divided by the count for "mean").
        Fallback: scatter_add of those values at the labels."""
        return fallbacks.nll_loss_grad(self, grad_output, target, classes, ignore_index,
                                       reduction)

    # Optimizer steps update `param` and their state buffers in place (same shape and dtype as
    # param; a state buffer that is None is not used). Hyperparameters are Python floats. They
    # follow PyTorch's documented update rules (fallbacks.py spells each one out).

    def sgd_step(self, param: Buffer, grad: Buffer, momentum_buffer: Buffer | None, lr: float,
                 momentum: float, dampening: float, nesterov: bool, weight_decay: float,
                 first_step: bool) -> None:
        """g = grad + weight_decay * param; with momentum: buf = g on the first step, else
        buf = momentum * buf + (1 - dampening) * g; then g = g + momentum * buf (nesterov) or
        g = buf; finally param -= lr * g. momentum_buffer is None when momentum == 0."""
        fallbacks.sgd_step(self, param, grad, momentum_buffer, lr, momentum, dampening,
                           nesterov, weight_decay, first_step)

    def rmsprop_step(self, param: Buffer, grad: Buffer, square_avg: Buffer,
                     grad_avg: Buffer | None, momentum_buffer: Buffer | None, lr: float,
                     alpha: float, eps: float, momentum: float, weight_decay: float) -> None:
        """g = grad + weight_decay * param; v = alpha v + (1 - alpha) g^2; centered (grad_avg
        given): a = alpha a + (1 - alpha) g, avg = sqrt(v - a^2) + eps, else avg = sqrt(v) + eps;
        with momentum_buffer: buf = momentum buf + g / avg, param -= lr buf; else
        param -= lr g / avg."""
        fallbacks.rmsprop_step(self, param, grad, square_avg, grad_avg, momentum_buffer, lr,
                               alpha, eps, momentum, weight_decay)

    def adam_step(self, param: Buffer, grad: Buffer, exp_avg: Buffer, exp_avg_sq: Buffer,
                  max_exp_avg_sq: Buffer | None, step: int, lr: float, beta1: float,
                  beta2: float, eps: float, weight_decay: float,
                  decoupled_weight_decay: bool) -> None:
        """Adam (decoupled_weight_decay=False: g = grad + weight_decay * param) and AdamW
        (True: param *= 1 - lr * weight_decay first). m = beta1 m + (1 - beta1) g;
        v = beta2 v + (1 - beta2) g^2; amsgrad (max_exp_avg_sq given): vmax = max(vmax, v) is
        used for v; param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
        `step` counts from 1."""
        fallbacks.adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr,
                            beta1, beta2, eps, weight_decay, decoupled_weight_decay)

    # ---- capabilities ----------------------------------------------------------------------

    def defer_host_check(self, buffer: Buffer, check) -> bool:
        """For an op that must check a buffer's values on the host (nll_loss's class labels):
        False when the check can run now (the caller then runs it). A backend that is recording
        a replayable graph may instead keep `check` to run on the host copy of the matching
        input before each replay, and return True."""
        return False
