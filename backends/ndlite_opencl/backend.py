"""The OpenCL backend: every primitive of the contract as OpenCL C kernels driven by PyOpenCL.

One context and one in-order queue per device; memory from a pyopencl MemoryPool (a buffer
freed by Python goes back to the pool, and a later kernel that reuses it runs after every
kernel queued before, so reuse is safe). Each primitive is a method here; the work is done in
the modules beside this one: elementwise.py (every elementwise primitive, cast and copy: the
one `map` kernel), reduce.py, linalg.py (matmul), indexing.py, conv.py and nn.py (the
neural-network fast paths), optim.py (fused optimizer steps). Views are array.py's.
float16 and bfloat16 are stored in half and computed in float32 (halves.py).
"""

from __future__ import annotations

import os

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools

from ndlite.device import Backend, DTypeError, OutOfMemoryError, ShapeError

from . import conv, devices, elementwise, indexing, linalg, mathops, nn, optim, reduce, transformer
from . import layers as layer_kernels
from . import norm as norm_kernels
from .array import (
    DTYPES,
    INT32_LIMIT,
    CLArray,
    broadcast_shape,
    broadcast_view,
    c_strides,
    numel,
    permute_view,
    reshape_strides,
    slice_view,
)
from .elementwise import apply, binary, scalar
from .halves import IDS, fill_pattern, host_view, install
from .kernels import STORAGE, KernelCache

_MEMORY_ERRORS = ("MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_RESOURCES", "OUT_OF_HOST_MEMORY",
                  "INVALID_BUFFER_SIZE")
_BOOL = np.dtype(bool)
_F16, _BF16 = IDS[0], IDS[-1]


class OpenCLBackend(Backend):
    """ndlite on an OpenCL device: `opencl`, `opencl:N`, `opencl:cpu`, `opencl:gpu`.

    >>> import ndlite
    >>> b = ndlite.get_backend("opencl")  # doctest: +SKIP
    >>> b.to_numpy(b.add(b.from_numpy(np.ones(2, np.float32)), 1.0))  # doctest: +SKIP
    array([2., 2.], dtype=float32)
    """

    kind = "opencl"
    asynchronous = True
    _transformer_kernels = transformer  # the transformer paths' kernels (Backend calls them)
    _norm_kernels = norm_kernels  # the batch-norm paths' kernels (likewise)
    _layer_kernels = layer_kernels  # conv2d_bias, linear_grad, log_softmax_grad (likewise)
    _step_kernels = optim  # sgd_steps, rmsprop_steps, adam_steps (likewise)

    def __init__(self, device: str | None = None):
        self.index, self.device = devices.select(device)
        self.name = f"opencl:{self.index}"
        self.context = cl.Context([self.device])
        # profiling costs a little per launch; benchmarks ask for it through the environment
        profiling = os.environ.get("NDLITE_OPENCL_PROFILE", "") not in ("", "0")
        self.queue = cl.CommandQueue(
            self.context, properties=cl.command_queue_properties.PROFILING_ENABLE
            if profiling else 0)
        self.pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        self.kernels = KernelCache(self.context, self.device)
        self.fp64 = devices.has_fp64(self.device)
        self.dtypes = frozenset(d for d in DTYPES if self.fp64 or d != np.dtype("float64"))
        self.is_gpu = devices.kind_of(self.device) == "GPU"
        self.compute_units = self.device.max_compute_units
        self.max_group = self.device.max_work_group_size
        self.group = min(256, self.max_group)
        self._map_kernels: dict[tuple, object] = {}
        self._plans: dict[tuple, tuple] = {}
        self._layouts: dict[tuple, np.ndarray] = {}
        self._held_layouts: dict[object, dict] = {}
        self._local = (self.group,)
        self._halves = False  # the float32 fallbacks of halves.py installed (at a first half)

    # ---- identity and capabilities ---------------------------------------------------------

    def device_name(self) -> str:
        return self.device.name.strip()

    def info(self) -> dict:
        return {
            "device": devices.describe(self.device),
            "fp64": self.fp64,
            "pyopencl": cl.VERSION_TEXT,
            "platforms": devices.platforms_info(),
            "devices": [f"opencl:{i}: {devices.describe(d)}"
                        for i, d in enumerate(devices.all_devices())],
        }

    def memory_in_use(self) -> int:
        return self.pool.active_bytes

    # ---- memory ----------------------------------------------------------------------------

    def _allocate(self, nbytes: int, what):
        """Pool memory for `what` (a string, or a tuple formatted only for an error message);
        out of memory frees the pool's cache and tries once more."""
        for attempt in (0, 1):
            try:
                return self.pool.allocate(nbytes)
            except cl.Error as exc:
                if not any(code in str(exc) for code in _MEMORY_ERRORS):
                    raise
                if attempt == 0:
                    self.pool.free_held()
                    continue
                if isinstance(what, tuple):
                    what = "{} {} {}".format(*what)
                raise OutOfMemoryError(
                    f"{what}: out of memory on {self.name} ({self.device_name()}) allocating "
                    f"{nbytes / 2**20:.1f} MiB ({self.pool.active_bytes / 2**20:.1f} MiB in use; "
                    f"device max allocation {self.device.max_mem_alloc_size / 2**20:.0f} MiB): "
                    f"{exc}") from None

    def _new(self, shape: tuple, dtype: np.dtype, what: str = "empty") -> CLArray:
        n = numel(shape)
        if not self._halves and (dtype is _F16 or dtype is _BF16):
            self._halves = install(self)
        data = self._allocate(n * dtype.itemsize, (what, shape, dtype)) if n else None
        return CLArray(data, shape, dtype, wide=n > INT32_LIMIT)

    def _launch(self, kernel, n: int, args) -> None:
        """One work-item per element (n of them) in work-groups of `self.group`."""
        group = self.group
        self.enqueue(kernel, (-(-n // group) * group,), (group,), args)

    def enqueue(self, kernel, grid: tuple, local: tuple, args, queue=None):
        """Set `kernel`'s arguments and queue it; returns the event.

        A layout (a NumPy array passed by value) is set only when it is not the one the kernel
        already holds: some drivers (PoCL) take ~30 us to set a struct argument, more than the
        launch itself, and a loop repeats the same layouts. Every launch goes through here, so
        the record of what each kernel holds stays true."""
        held = self._held_layouts.get(kernel)
        if held is None:
            held = self._held_layouts[kernel] = {}
        for i, arg in enumerate(args):
            if type(arg) is np.ndarray:
                if held.get(i) is not arg:
                    kernel.set_arg(i, arg)
                    held[i] = arg
            else:
                kernel.set_arg(i, arg)
        return cl.enqueue_nd_range_kernel(queue or self.queue, kernel, grid, local)

    def layout(self, values, idx_np):
        """`values` as a kernel layout array; equal layouts give the same array object."""
        key = (idx_np, *values)
        array = self._layouts.get(key)
        if array is None:
            if len(self._layouts) > 8192:
                self._layouts.clear()
            array = self._layouts[key] = np.array(values, idx_np)
        return array

    def _index_type(self, n: int, *arrays: CLArray) -> tuple[str, type]:
        """int where every index a kernel forms fits in 31 bits, else long."""
        if n <= INT32_LIMIT and not any(a.wide for a in arrays):
            return "int", np.int32
        return "long", np.int64

    # ---- transfer --------------------------------------------------------------------------

    def from_numpy(self, array: np.ndarray) -> CLArray:
        array = np.asarray(array)
        dtype = DTYPES.get(array.dtype.newbyteorder("="))
        if dtype is None or dtype not in self.dtypes:
            raise DTypeError(f"from_numpy: {self.name} ({self.device_name()}) does not support "
                             f"{array.dtype} (supported: {sorted(str(d) for d in self.dtypes)})")
        array = np.asarray(array, dtype=dtype, order="C")  # (ascontiguousarray makes 0-d 1-d)
        out = self._new(array.shape, dtype, "from_numpy")
        if out.size:
            cl.enqueue_copy(self.queue, out.data, host_view(array), is_blocking=True)
        return out

    def to_numpy(self, x: CLArray) -> np.ndarray:
        host = np.empty(x.shape, x.dtype)
        if x.size == 0:
            return host
        if not x.contiguous:
            x = self.copy(x)
        cl.enqueue_copy(self.queue, host_view(host), x.data,
                        src_offset=x.offset * x.dtype.itemsize,
                        is_blocking=True)
        return host

    def full(self, shape: tuple, value, dtype: np.dtype) -> CLArray:
        dtype = DTYPES[np.dtype(dtype)]
        out = self._new(tuple(shape), dtype, "full")
        if out.size:
            self._fill(out, value)
        return out

    def empty(self, shape: tuple, dtype: np.dtype) -> CLArray:
        return self._new(tuple(shape), DTYPES[np.dtype(dtype)])

    def _fill(self, out: CLArray, value) -> None:
        """Fill a contiguous `out` with one value."""
        pattern = fill_pattern(value, out.dtype) if out.dtype in STORAGE \
            else np.asarray(scalar(value, out.dtype))
        cl.enqueue_fill_buffer(self.queue, out.data, pattern, out.offset * out.dtype.itemsize,
                               out.size * out.dtype.itemsize)

    def astype(self, x: CLArray, dtype: np.dtype) -> CLArray:
        dtype = DTYPES[np.dtype(dtype)]
        if dtype not in self.dtypes:
            raise DTypeError(f"astype: {self.name} does not support {dtype}")
        return apply(self, "COPY", [x], dtype)

    def copy(self, x: CLArray) -> CLArray:
        if not x.contiguous:
            return apply(self, "COPY", [x], x.dtype)
        out = self._new(x.shape, x.dtype, "copy")
        if out.size:
            size = x.dtype.itemsize
            cl.enqueue_copy(self.queue, out.data, x.data, byte_count=x.size * size,
                            src_offset=x.offset * size, dst_offset=0)
        return out

    def assign(self, dst: CLArray, src) -> None:
        if dst.size == 0:
            return
        if not isinstance(src, CLArray):
            if dst.contiguous:
                self._fill(dst, src)
            else:
                apply(self, "COPY", [scalar(src, dst.dtype)], dst.dtype, out=dst)
            return
        if src.data is dst.data:
            src = self.copy(src)  # the two may overlap: read all of src before writing dst
        apply(self, "COPY", [broadcast_view(src, dst.shape)], dst.dtype, out=dst)

    def synchronize(self) -> None:
        self.queue.finish()

    # ---- elementwise (elementwise.py: the map kernel of kernels/elementwise.cl) ------------

    def neg(self, x): return apply(self, "NEG", [x], x.dtype)
    def exp(self, x): return apply(self, "EXP", [x], x.dtype)
    def log(self, x): return apply(self, "LOG", [x], x.dtype)
    def sqrt(self, x): return apply(self, "SQRT", [x], x.dtype)
    def tanh(self, x): return apply(self, "TANH", [x], x.dtype)
    def erf(self, x): return apply(self, "ERF", [x], x.dtype)
    def sigmoid(self, x): return apply(self, "SIGMOID", [x], x.dtype)
    def relu(self, x): return apply(self, "RELU", [x], x.dtype)
    def abs(self, x): return apply(self, "ABS", [x], x.dtype)
    def sign(self, x): return apply(self, "SIGN", [x], x.dtype)

    def add(self, a, b): return binary(self, "add", "ADD", a, b)
    def sub(self, a, b): return binary(self, "sub", "SUB", a, b)
    def mul(self, a, b): return binary(self, "mul", "MUL", a, b)
    def div(self, a, b): return binary(self, "div", "DIV", a, b)
    def pow(self, a, b): return elementwise.power(self, a, b)
    def maximum(self, a, b): return binary(self, "maximum", "MAXIMUM", a, b)
    def minimum(self, a, b): return binary(self, "minimum", "MINIMUM", a, b)

    def eq(self, a, b): return binary(self, "eq", "EQ", a, b, _BOOL)
    def ne(self, a, b): return binary(self, "ne", "NE", a, b, _BOOL)
    def lt(self, a, b): return binary(self, "lt", "LT", a, b, _BOOL)
    def le(self, a, b): return binary(self, "le", "LE", a, b, _BOOL)
    def gt(self, a, b): return binary(self, "gt", "GT", a, b, _BOOL)
    def ge(self, a, b): return binary(self, "ge", "GE", a, b, _BOOL)

    def where(self, cond, a, b): return elementwise.where(self, cond, a, b)
    def relu_grad(self, g, out): return apply(self, "RELU_GRAD", [g, out], g.dtype)  # step_
    def add_scalar_inplace(self, x, v): elementwise.add_scalar_inplace(self, x, v)  # fallbacks

    def math(self, name, x):
        op, dtype = mathops.unary_op(name, x.dtype)
        return apply(self, op, [x], dtype, in_dtype=x.dtype)

    def math2(self, name, a, b):
        dtype = a.dtype if isinstance(a, CLArray) else b.dtype
        return binary(self, name, mathops.binary_op(name, dtype), a, b)

    # ---- reductions (reduce.py) and matmul (linalg.py) -------------------------------------

    def sum(self, x, axes, keepdims):
        return reduce.reduce(self, x, tuple(axes), keepdims, "sum")

    def max(self, x, axes, keepdims):
        return reduce.reduce(self, x, tuple(axes), keepdims, "max")

    def min(self, x, axes, keepdims):
        return reduce.reduce(self, x, tuple(axes), keepdims, "min")

    def argmax(self, x, axis, keepdims):
        return reduce.reduce(self, x, (axis,), keepdims, "argmax")

    def matmul(self, a, b):
        return linalg.matmul(self, a, b)

    # ---- movement --------------------------------------------------------------------------

    def reshape(self, x: CLArray, shape: tuple) -> CLArray:
        shape = tuple(shape)
        if numel(shape) != x.size:
            raise ShapeError(f"reshape: cannot reshape {x.shape} ({x.size} elements) to {shape}")
        strides = reshape_strides(x.shape, x.strides, shape)
        if strides is None:  # the layout allows no view: copy to row-major first
            x = self.copy(x)
            strides = c_strides(shape)
        return x.view(shape, strides, x.offset)

    def shares_memory(self, a: CLArray, b: CLArray) -> bool:
        return a.data is b.data

    def permute(self, x: CLArray, axes: tuple) -> CLArray:
        return permute_view(x, tuple(axes))

    def broadcast_to(self, x: CLArray, shape: tuple) -> CLArray:
        shape = tuple(shape)
        broadcast_shape("broadcast_to", x.shape, shape)
        return broadcast_view(x, shape)

    def slice(self, x: CLArray, key: tuple) -> CLArray:
        return slice_view(x, tuple(key))

    # pad and concatenate: the base class's (a new buffer, then `assign` into slice views) is
    # what this backend would write

    # ---- indexing (indexing.py) ------------------------------------------------------------

    def gather(self, x, index, axis):
        return indexing.gather(self, x, index, axis)

    def scatter_add(self, index, values, axis, size):
        return indexing.scatter_add(self, index, values, axis, size)

    def put(self, dst, flat_index, values):
        indexing.put(self, dst, flat_index, values)

    # ---- fast paths (conv.py, nn.py, optim.py) ---------------------------------------------

    def conv2d(self, x, weight, stride, padding, dilation, groups):
        return conv.conv2d(self, x, weight, stride, padding, dilation, groups)

    def conv2d_grad_input(self, grad_output, weight, input_shape, stride, padding, dilation,
                          groups):
        return conv.conv2d_grad_input(self, grad_output, weight, tuple(input_shape), stride,
                                      padding, dilation, groups)

    def conv2d_grad_weight(self, x, grad_output, weight_shape, stride, padding, dilation,
                           groups):
        return conv.conv2d_grad_weight(self, x, grad_output, tuple(weight_shape), stride,
                                       padding, dilation, groups)

    def max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode):
        return nn.max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode)

    def max_pool2d_grad(self, grad_output, indices, input_shape, kernel_size, stride, padding,
                        dilation, ceil_mode):
        return nn.max_pool2d_grad(self, grad_output, indices, tuple(input_shape), kernel_size,
                                    stride, padding, dilation, ceil_mode)

    def avg_pool2d(self, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
        return nn.avg_pool2d(self, x, kernel_size, stride, padding, ceil_mode,
                               count_include_pad)

    def avg_pool2d_grad(self, grad_output, input_shape, kernel_size, stride, padding, ceil_mode,
                        count_include_pad):
        return nn.avg_pool2d_grad(self, grad_output, tuple(input_shape), kernel_size, stride,
                                    padding, ceil_mode, count_include_pad)

    def log_softmax(self, x, axis):
        return nn.log_softmax(self, x, axis)

    def nll_loss(self, input, target, ignore_index, reduction):
        return nn.nll_loss(self, input, target, ignore_index, reduction)

    def nll_loss_grad(self, grad_output, target, classes, ignore_index, reduction):
        return nn.nll_loss_grad(self, grad_output, target, classes, ignore_index, reduction)

    def sgd_step(self, param, grad, momentum_buffer, lr, momentum, dampening, nesterov,
                 weight_decay, first_step):
        optim.sgd_step(self, param, grad, momentum_buffer, lr, momentum, dampening, nesterov,
                       weight_decay, first_step)

    def rmsprop_step(self, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps,
                     momentum, weight_decay):
        optim.rmsprop_step(self, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha,
                           eps, momentum, weight_decay)

    def adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1,
                  beta2, eps, weight_decay, decoupled_weight_decay):
        optim.adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr,
                        beta1, beta2, eps, weight_decay, decoupled_weight_decay)
