"""The CuPy backend: ndlite on NVIDIA GPUs (CUDA), one instance per device ("cupy:0", ...).

Every primitive comes from the shared xp base over `cupy`, whose hot ufuncs are bound as
instance attributes (a call costs no Python frame of ours). This class overrides what CuPy
does differently from the contract:
- binary arithmetic and comparisons are kernels with typed operands, so a Python scalar takes
  the buffer's dtype even next to a 0-d array (CuPy's ufuncs would widen it); maximum,
  minimum and relu follow NumPy bitwise on ties of -0.0/+0.0; pow is exact for the exponents
  0, 1, 2, -1; sigmoid is one fused kernel instead of five passes (kernels/elementwise.cu);
- gather, scatter_add and put use gather-per-output kernels: no atomics, bitwise
  deterministic run to run (indexing.py);
- max/min reductions pick NumPy's one of two equal values (-0.0 or +0.0) (kernels/reduce.cu);
- transfers and fills keep -0.0 (CuPy's `fill` memsets any zero), reductions over no axes,
  `to_numpy` (a copy), `assign` between overlapping buffers.

The neural-network fast paths (convolution, pooling, log_softmax, nll_loss, optimizer steps)
are CUDA kernels in nn.py and optim.py; convolution goes to cuDNN first where its frontend is
installed (cudnn.py, NDLITE_CUDNN=0 switches it off), ndlite's kernels taking what it
declines. CUDA graphs are a capability of this backend: `graph_recorder` hands out graph.py's
GraphRecorder, which ndlite.cuda.capture drives; while a step is recorded, this class's own
primitives look at `_recording` (host reads refuse, matmul takes the recordable cuBLAS path,
`defer_host_check` keeps a check for each replay).

Memory comes from CuPy's pool with ndlite's out-of-memory rule (memory.py). float32 matmul
never uses TF32 unless `ndlite.backends.cuda.matmul.allow_tf32` is set (see
`_pin_fp32_matmul`). Work is queued on the device's current stream; `to_numpy` and
`synchronize` wait for it.
"""

from __future__ import annotations

import math
import os
from functools import partial

import numpy as np

from ndlite.device import Backend, BackendUnavailableError, XpBackend, flags
from ndlite.dtypes import HALF

from . import cudnn, graph, half  # import no CuPy

INSTALL = "pip install 'ndlite[cuda12]' or 'ndlite[cuda13]' (the one matching your CUDA driver)"


def _import_cupy():
    try:
        import cupy
    except ModuleNotFoundError as exc:
        if exc.name != "cupy":
            raise BackendUnavailableError(
                "cupy", f"CuPy is installed but broken: {exc}", f"reinstall CuPy: {INSTALL}"
            ) from None
        raise BackendUnavailableError("cupy", "CuPy is not installed", INSTALL) from None
    except Exception as exc:  # noqa: BLE001 - e.g. CUDA libraries missing: report, don't crash
        raise BackendUnavailableError(
            "cupy", f"CuPy failed to import ({type(exc).__name__}: {exc})",
            f"install the CuPy build for your CUDA version: {INSTALL}",
        ) from None
    return cupy


def _device_index(cupy, device: str | None) -> int:
    """The CUDA device number that `device` ("", None, "0", "1", ...) names."""
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError: no driver, no GPU, old driver
        raise BackendUnavailableError(
            "cupy", f"no usable CUDA device ({exc})",
            "check that `nvidia-smi` lists a GPU and that the driver supports CuPy's CUDA version",
        ) from None
    if count == 0:
        raise BackendUnavailableError("cupy", "no CUDA device found", "run on a machine with an "
                                      "NVIDIA GPU, or pick another backend (NDLITE_BACKEND)")
    if device is None or device == "":
        return cupy.cuda.runtime.getDevice()
    if not device.isdigit():
        raise BackendUnavailableError(
            "cupy", f"device {device!r} is not a device number",
            f"use cupy or cupy:N with N from 0 to {count - 1}")
    index = int(device)
    if index >= count:
        raise BackendUnavailableError(
            "cupy", f"device {index} does not exist: {count} CUDA device(s) found",
            f"use cupy:0 to cupy:{count - 1}")
    return index


def _pin_fp32_matmul() -> None:
    """No TF32 for float32 matmul, whatever CUPY_TF32 says.

    CuPy's matmul calls cublasGemmEx with a compute type chosen once per process, from the
    environment variable CUPY_TF32 (CUBLAS_COMPUTE_32F_FAST_TF32 when it is > 0). Pinning it
    to COMPUTE_TYPE_DEFAULT gives CUBLAS_COMPUTE_32F, full float32 precision (CuPy's handles
    stay in CUBLAS_DEFAULT_MATH, so cuBLAS does not substitute TF32 tensor-op math either).
    This is process-wide: raw CuPy float32 matmuls in the same process run without TF32 too.
    `ndlite.backends.cuda.matmul.allow_tf32 = True` switches to COMPUTE_TYPE_TF32 (flags.py).
    """
    try:
        from cupy._core import _routines_linalg as linalg

        def apply(switches):
            tf32 = getattr(linalg, "COMPUTE_TYPE_TF32", linalg.COMPUTE_TYPE_DEFAULT)
            linalg.set_compute_type(np.float32, tf32 if switches["matmul"]
                                    else linalg.COMPUTE_TYPE_DEFAULT)

        flags.on_tf32_change(apply)
    except (ImportError, AttributeError):  # a CuPy without the switch reads CUPY_TF32 itself
        if os.environ.get("CUPY_TF32", "0").strip() not in ("", "0"):
            raise BackendUnavailableError(
                "cupy", "CUPY_TF32 asks for TF32 float32 matmuls and this CuPy cannot be told "
                        "otherwise (ndlite computes float32 in full precision)",
                "unset CUPY_TF32") from None


#: primitives that are the backend's own kernels (kernels/), bound as instance attributes
_KERNEL_PRIMITIVES = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne",
                      "lt", "le", "gt", "ge", "relu", "sigmoid", "erf", "gelu", "gelu_grad",
                      "relu_grad", "add_scalar_inplace")

#: every primitive and fast path of the contract (what runs on a device)
_PRIMITIVES = tuple(sorted({
    name for klass in Backend.__mro__ for name, value in vars(klass).items()
    if callable(value) and not name.startswith("_") and name != "device_name"
}))


def _on_device(fn, device):
    """`fn` run with `device` current (for a backend whose device is not the current one)."""

    def call(*args, **kwargs):
        with device:
            return fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "primitive")
    return call


def _version(v: int) -> str:
    """CUDA's integer version (13000) as "13.0"."""
    return f"{v // 1000}.{v % 1000 // 10}"


class CupyBackend(XpBackend):
    """A CUDA device through CuPy. `device` is None (the current device) or "0", "1", ...

    `switch_device` makes every primitive make its device current first (a `with Device`
    per call, a few microseconds). It is on by default for a device that was not current when
    the backend started (cupy:1 while device 0 is current), off otherwise: then primitives
    are CuPy's ufuncs themselves, and run on whichever device is current.
    """

    kind = "cupy"
    asynchronous = True
    #: the graph.GraphRecorder recording a step right now, else None
    _recording = None
    #: the hyperparameter table that fused optimizer steps write instead of launching with
    #: their values (while a step is recorded, or in a scalars-only pass before a replay)
    _optimizer_table = None
    #: cudnn.Convolutions while cuDNN is on, else None (nn.py asks it first)
    _cudnn = None

    def __init__(self, device: str | None = None, *, switch_device: bool | None = None):
        cupy = _import_cupy()
        index = _device_index(cupy, device)
        from . import indexing, memory
        from .kernels import kernels

        self.name = f"cupy:{index}"
        self._device = cupy.cuda.Device(index)
        with self._device:
            self._pool = memory.install()
            _pin_fp32_matmul()
        super().__init__(cupy)
        self._kernels = k = kernels()
        for name in _KERNEL_PRIMITIVES:
            setattr(self, name, getattr(k, name))
        from . import blas, columns, layers, lt, nn, norm, optim, transformer

        self._indexing, self._blas, self._nn, self._optim = indexing, blas, nn, optim
        self._transformer_kernels, self._columns, self._lt = transformer, columns, lt
        # (Backend calls them)
        self._norm_kernels, self._step_kernels, self._layer_kernels = norm, optim, layers
        self._cudnn = cudnn.start(cupy, self._device, partial(nn.cudnn_agrees, self))
        # float16/bfloat16 through float32, but convolutions are cuDNN's in half when it is on
        half.install(self, cupy, _KERNEL_PRIMITIVES,
                     native=cudnn.CONVOLUTIONS if self._cudnn is not None else ())
        if switch_device is None:
            switch_device = index != cupy.cuda.runtime.getDevice()
        self.switch_device = switch_device
        if switch_device:
            for name in _PRIMITIVES:
                setattr(self, name, _on_device(getattr(self, name), self._device))

    # ---- identity and capabilities ---------------------------------------------------------

    def device_name(self) -> str:
        props = self.xp.cuda.runtime.getDeviceProperties(self._device.id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def info(self) -> dict:
        cupy = self.xp
        runtime = cupy.cuda.runtime
        props = runtime.getDeviceProperties(self._device.id)
        free, total = self._device.mem_info
        devices = []
        for i in range(runtime.getDeviceCount()):
            p = runtime.getDeviceProperties(i)
            name = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
            devices.append(f"cupy:{i}: {name} ({p['totalGlobalMem'] / 2**30:.1f} GiB, "
                           f"compute capability {p['major']}.{p['minor']})")
        with self._device:
            pool = f"{self._pool.used_bytes():,} bytes in use, {self._pool.total_bytes():,} held"
        return {
            **super().info(),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "multiprocessors": props["multiProcessorCount"],
            "memory": f"{total / 2**30:.1f} GiB total, {free / 2**30:.1f} GiB free",
            "memory_pool": pool,
            "cuda_runtime": _version(runtime.runtimeGetVersion()),
            "cuda_driver": _version(runtime.driverGetVersion()),
            "cupy": cupy.__version__,
            "tf32": "on for float32 matmul" if flags.TF32["matmul"] else
                    "off (float32 matmul computes in CUBLAS_COMPUTE_32F)",
            "cudnn": cudnn.describe(self._cudnn),
            "devices": devices,
        }

    def memory_in_use(self) -> int:
        return self._pool.used_bytes()

    # ---- transfer and memory ---------------------------------------------------------------

    def from_numpy(self, array):
        if self._recording is not None:
            raise graph.refused("from_numpy")
        # a byte copy: cupy.array() of a 0-d array loses the sign of -0.0
        out = self.xp.empty(array.shape, dtype=array.dtype)
        out.set(array if array.flags.c_contiguous else np.ascontiguousarray(array))
        return out

    def to_numpy(self, x):
        if self._recording is not None:
            raise graph.refused("to_numpy")
        return x.get()  # a host copy; waits for the work that produces x

    def full(self, shape, value, dtype):
        out = self.xp.empty(shape, dtype=dtype)
        if value == 0 and math.copysign(1.0, value) < 0:
            self.xp.copyto(out, value, casting="unsafe")  # fill() memsets zeros: -0.0 -> +0.0
        else:
            out.fill(value)
        return out

    def synchronize(self) -> None:
        if self._recording is not None:
            raise graph.refused("synchronize")
        self._device.synchronize()

    def assign(self, dst, src):
        cupy = self.xp
        if isinstance(src, cupy.ndarray) and cupy.may_share_memory(dst, src):
            src = src.copy()  # NumPy reads all of src before writing; a GPU copy would race
        cupy.copyto(dst, src, casting="unsafe")

    # ---- linear algebra ----------------------------------------------------------------------
    def math(self, name, x):
        if name == "erfc":  # CuPy keeps the special functions in cupyx
            from cupyx.scipy import special

            return special.erfc(x)
        return super().math(name, x)

    def matmul(self, a, b):
        if a.dtype in HALF and (a.ndim < 2 or b.ndim < 2):
            return half.vector_matmul(self, a, b)
        if a.ndim > 2 and b.ndim == 2 and a.size and a.flags.c_contiguous:  # one GEMM,
            out = self.matmul(a.reshape(-1, a.shape[-1]), b)  # not a batch of small ones
            return out.reshape(a.shape[:-1] + (b.shape[1],))
        return self._blas.product(a, b, self._recording is not None)

    def linear(self, x, weight, bias):  # the bias in cuBLASLt's epilogue where it can (lt.py)
        out = self._lt.linear(x, weight, bias)
        return super().linear(x, weight, bias) if out is None else out

    # ---- reductions ------------------------------------------------------------------------

    def sum(self, x, axes, keepdims):
        if not axes:  # NumPy reduces nothing, but sums bool and int32 to int64 all the same
            return x.astype(np.int64) if x.dtype.kind in "biu" else x.copy()
        out = self._columns.blocked_sum(x, axes, keepdims)  # bias gradients: in double
        if out is not None:
            return out
        if x.dtype == np.float32:  # accumulate in float64: accurate along any axis
            return x.sum(axis=axes, keepdims=keepdims, dtype=np.float64).astype(np.float32)
        return x.sum(axis=axes, keepdims=keepdims)

    # max and min keep NumPy's choice between equal values (-0.0 or +0.0): kernels/reduce.cu
    def max(self, x, axes, keepdims):
        return self._kernels.max(x, axis=axes, keepdims=keepdims) if axes else x.copy()

    def min(self, x, axes, keepdims):
        return self._kernels.min(x, axis=axes, keepdims=keepdims) if axes else x.copy()

    def argmax(self, x, axis, keepdims):
        return x.argmax(axis=axis, keepdims=keepdims).astype(np.int64, copy=False)

    def argmin(self, x, axis, keepdims):
        return x.argmin(axis=axis, keepdims=keepdims).astype(np.int64, copy=False)

    # ---- indexing --------------------------------------------------------------------------

    def gather(self, x, index, axis):
        return self._indexing.gather(x, index, axis)

    def scatter_add(self, index, values, axis, size):
        return self._indexing.scatter_add(index, values, axis, size)

    def put(self, dst, flat_index, values):
        self._indexing.put(dst, flat_index, values)

    # ---- neural-network fast paths (nn.py, optim.py) ------------------------------------------

    def conv2d(self, x, weight, stride, padding, dilation, groups):
        return self._nn.conv2d(self, x, weight, stride, padding, dilation, groups)

    def conv2d_grad_input(self, grad_output, weight, input_shape, stride, padding, dilation,
                          groups):
        return self._nn.conv2d_grad_input(self, grad_output, weight, input_shape, stride,
                                          padding, dilation, groups)

    def conv2d_grad_weight(self, x, grad_output, weight_shape, stride, padding, dilation,
                           groups):
        return self._nn.conv2d_grad_weight(self, x, grad_output, weight_shape, stride, padding,
                                           dilation, groups)

    def max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode):
        return self._nn.max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode)

    def max_pool2d_grad(self, grad_output, indices, input_shape, kernel_size, stride, padding,
                        dilation, ceil_mode):
        return self._nn.max_pool2d_grad(self, grad_output, indices, input_shape, kernel_size,
                                        stride, padding, dilation, ceil_mode)

    def avg_pool2d(self, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
        return self._nn.avg_pool2d(self, x, kernel_size, stride, padding, ceil_mode,
                                   count_include_pad)

    def avg_pool2d_grad(self, grad_output, input_shape, kernel_size, stride, padding, ceil_mode,
                        count_include_pad):
        return self._nn.avg_pool2d_grad(self, grad_output, input_shape, kernel_size, stride,
                                        padding, ceil_mode, count_include_pad)

    def log_softmax(self, x, axis):
        return self._nn.log_softmax(self, x, axis)

    def nll_loss(self, input, target, ignore_index, reduction):
        return self._nn.nll_loss(self, input, target, ignore_index, reduction)

    def nll_loss_grad(self, grad_output, target, classes, ignore_index, reduction):
        return self._nn.nll_loss_grad(self, grad_output, target, classes, ignore_index,
                                      reduction)

    # the transformer paths come from Backend, on transformer.py (`_transformer_kernels`)
    def dropout_mask(self, shape, p, seed, dtype):
        if self._recording is not None:  # a replay would reuse the recorded seed's mask
            raise graph.refused("dropout")
        return self._transformer_kernels.dropout_mask(self, shape, p, seed, dtype)

    def sgd_step(self, param, grad, momentum_buffer, lr, momentum, dampening, nesterov,
                 weight_decay, first_step):
        self._optim.sgd_step(self, param, grad, momentum_buffer, lr, momentum, dampening,
                             nesterov, weight_decay, first_step)

    def rmsprop_step(self, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps,
                     momentum, weight_decay):
        self._optim.rmsprop_step(self, param, grad, square_avg, grad_avg, momentum_buffer, lr,
                                 alpha, eps, momentum, weight_decay)

    def adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1,
                  beta2, eps, weight_decay, decoupled_weight_decay):
        self._optim.adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr,
                              beta1, beta2, eps, weight_decay, decoupled_weight_decay)

    # ---- CUDA graphs (graph.py; the public entry point is ndlite.cuda.capture) -------------

    def graph_recorder(self, host_inputs):
        """A graph.GraphRecorder for one step, its static inputs holding `host_inputs`."""
        return graph.GraphRecorder(self, host_inputs)

    def defer_host_check(self, buffer, check) -> bool:
        """Outside a recording, False: the caller checks now. While a step is recorded,
        `buffer` must be one of its static inputs: `check(host values)` runs now and on each
        replay's new values before anything runs (GraphRecorder.load); True."""
        if self._recording is None:
            return False
        self._recording.defer_check(buffer, check)
        return True
