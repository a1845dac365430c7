"""The OpenCL backend: every primitive of the contract as OpenCL C kernels driven by PyOpenCL.

One context and one in-order queue per device; memory from a pyopencl MemoryPool (a buffer
freed by Python goes back to the pool, and a later kernel that reuses it runs after every
kernel queued before, so reuse is safe). Elementwise work, casts and copies all go through the
one `map` kernel of kernels/elementwise.cl, specialized per (op, dtypes, scalar operands,
collapsed ndim, index width); the kernel object for each such key is looked up once and kept.
Reductions, matmul and indexing live in their own modules beside this one.
"""

from __future__ import annotations

import os

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools

from ndlite.device import Backend, DTypeError, OutOfMemoryError, ShapeError

from . import conv, devices, indexing, linalg, loss, optim, pool, reduce, softmax
from .array import (
    INT32_LIMIT,
    CLArray,
    broadcast_view,
    c_strides,
    collapse,
    numel,
    permute_view,
    reshape_strides,
    slice_view,
)
from .kernels import KernelCache, ctype

_DTYPES = {np.dtype(t): np.dtype(t) for t in ("float32", "float64", "int32", "int64", "bool")}
_UNARY = {"neg": "NEG", "exp": "EXP", "log": "LOG", "sqrt": "SQRT", "tanh": "TANH",
          "sigmoid": "SIGMOID", "relu": "RELU", "abs": "ABS", "sign": "SIGN"}
_ARITHMETIC = {"add": "ADD", "sub": "SUB", "mul": "MUL", "div": "DIV", "pow": "POW",
               "maximum": "MAXIMUM", "minimum": "MINIMUM"}
_COMPARISON = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}
#: scalar exponents NumPy's power gets exactly right that OpenCL's pow need not
_POW_SHORTCUTS = {2: "SQUARE", 1: "COPY", -1: "RECIPROCAL"}
#: elements per work-item of large contiguous elementwise ops on GPUs, and what is large
_PER_ITEM, _MANY = 4, 2**20
_MEMORY_ERRORS = ("MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_RESOURCES", "OUT_OF_HOST_MEMORY",
                  "INVALID_BUFFER_SIZE")


def _scalar(value, dtype: np.dtype):
    """A Python number as a kernel argument of `dtype` (NumPy's unsafe cast; bool as a byte)."""
    if dtype.kind == "b":
        return np.uint8(bool(value))
    try:
        return _SCALAR_TYPES[dtype](value)  # the direct constructor is 10x faster than astype
    except (OverflowError, ValueError):
        return np.asarray(value).astype(dtype)[()]


_SCALAR_TYPES = {d: d.type for d in _DTYPES}


class OpenCLBackend(Backend):
    """ndlite on an OpenCL device: `opencl`, `opencl:N`, `opencl:cpu`, `opencl:gpu`.

    >>> import ndlite
    >>> b = ndlite.get_backend("opencl")  # doctest: +SKIP
    >>> b.to_numpy(b.add(b.from_numpy(np.ones(2, np.float32)), 1.0))  # doctest: +SKIP
    array([2., 2.], dtype=float32)
    """

    kind = "opencl"
    asynchronous = True

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
        self.dtypes = frozenset(d for d in _DTYPES if self.fp64 or d != np.dtype("float64"))
        self.is_gpu = devices.kind_of(self.device) == "GPU"
        self.compute_units = self.device.max_compute_units
        self.max_group = self.device.max_work_group_size
        self.group = min(256, self.max_group)
        self._map_kernels: dict[tuple, object] = {}
        self._plans: dict[tuple, tuple] = {}
        self._layouts: dict[tuple, np.ndarray] = {}
        self._held_layouts: dict[object, dict] = {}
        self._local = (self.group,)

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
        dtype = _DTYPES.get(array.dtype.newbyteorder("="))
        if dtype is None or dtype not in self.dtypes:
            raise DTypeError(f"from_numpy: {self.name} ({self.device_name()}) does not support "
                             f"{array.dtype} (supported: {sorted(str(d) for d in self.dtypes)})")
        array = np.asarray(array, dtype=dtype, order="C")  # (ascontiguousarray makes 0-d 1-d)
        out = self._new(array.shape, dtype, "from_numpy")
        if out.size:
            cl.enqueue_copy(self.queue, out.data, array, is_blocking=True)
        return out

    def to_numpy(self, x: CLArray) -> np.ndarray:
        host = np.empty(x.shape, x.dtype)
        if x.size == 0:
            return host
        if not x.contiguous:
            x = self.copy(x)
        cl.enqueue_copy(self.queue, host, x.data, src_offset=x.offset * x.dtype.itemsize,
                        is_blocking=True)
        return host

    def full(self, shape: tuple, value, dtype: np.dtype) -> CLArray:
        dtype = _DTYPES[np.dtype(dtype)]
        out = self._new(tuple(shape), dtype, "full")
        if out.size:
            self._fill(out, value)
        return out

    def empty(self, shape: tuple, dtype: np.dtype) -> CLArray:
        return self._new(tuple(shape), _DTYPES[np.dtype(dtype)])

    def _fill(self, out: CLArray, value) -> None:
        """Fill a contiguous `out` with one value."""
        pattern = np.asarray(_scalar(value, out.dtype))
        cl.enqueue_fill_buffer(self.queue, out.data, pattern, out.offset * out.dtype.itemsize,
                               out.size * out.dtype.itemsize)

    def astype(self, x: CLArray, dtype: np.dtype) -> CLArray:
        dtype = _DTYPES[np.dtype(dtype)]
        if dtype not in self.dtypes:
            raise DTypeError(f"astype: {self.name} does not support {dtype}")
        return self._map("COPY", [x], dtype)

    def copy(self, x: CLArray) -> CLArray:
        if not x.contiguous:
            return self._map("COPY", [x], x.dtype)
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
                self._map("COPY", [_scalar(src, dst.dtype)], dst.dtype, out=dst)
            return
        if src.data is dst.data:
            src = self.copy(src)  # the two may overlap: read all of src before writing dst
        self._map("COPY", [broadcast_view(src, dst.shape)], dst.dtype, out=dst)

    def synchronize(self) -> None:
        self.queue.finish()

    # ---- elementwise -----------------------------------------------------------------------

    def _map(self, op: str, operands: list, out_dtype: np.dtype, out: CLArray | None = None,
             in_dtype: np.dtype | None = None) -> CLArray:
        """out = op(*operands) elementwise; operands are CLArrays or (already cast) scalars.

        The launch plan (kernel, layout, grid) is kept per operand layouts: a repeated call
        costs one dict lookup, an allocation and the enqueue."""
        sig = [op, out_dtype, in_dtype]
        for x in operands:
            sig.append((x.shape, x.strides, x.offset, x.dtype, x.wide)
                       if isinstance(x, CLArray) else None)
        if out is not None:
            sig.append((out.shape, out.strides, out.offset, out.wide))
        sig = tuple(sig)
        plan = self._plans.get(sig)
        if plan is None:
            if len(self._plans) > 8192:  # shapes that never repeat must not grow it forever
                self._plans.clear()
            plan = self._plans[sig] = self._map_plan(op, operands, out_dtype, out, in_dtype)
        kernel, layout, shape, n, grid = plan
        if out is None:
            out = self._new(shape, out_dtype, op.lower())
        if n:
            self.enqueue(kernel, grid, self._local,
                         (out.data, layout,
                          *[x.data if isinstance(x, CLArray) else x for x in operands]))
        return out

    def _map_plan(self, op, operands, out_dtype, out, in_dtype) -> tuple:
        buffers = [x for x in operands if isinstance(x, CLArray)]
        if out is None:
            shape = buffers[0].shape
            for x in buffers[1:]:
                if x.shape != shape:
                    shape = _broadcast_shapes(op.lower(), shape, x.shape)
            out = CLArray(None, shape, out_dtype)  # the layout a new output will have
        shape, n = out.shape, out.size
        if n == 0:
            return None, None, shape, 0, None
        zeros = (0,) * len(shape)
        views = [broadcast_view(x, shape) if isinstance(x, CLArray) else x for x in operands]
        strides = [v.strides if isinstance(v, CLArray) else zeros for v in views]
        dims, *collapsed = collapse(shape, out.strides, *strides)
        ndim = len(dims)
        layouts = zip(collapsed, [out, *views], strict=True)
        if ndim <= 1 and all(s == (1,) or not ndim for s, v in layouts if isinstance(v, CLArray)):
            ndim = 0  # every buffer contiguous: the kernel skips index arithmetic
        wide = n > INT32_LIMIT or any(x.wide for x in buffers) or out.wide
        idx, idx_np = ("long", np.int64) if wide else ("int", np.int32)
        scalars = tuple(not isinstance(v, CLArray) for v in views)
        dtypes = tuple(v.dtype if isinstance(v, CLArray) else in_dtype or out_dtype
                       for v in views)
        # a GPU streams large contiguous operands faster with several elements per item
        per_item = _PER_ITEM if self.is_gpu and ndim == 0 and n >= _MANY else 1
        key = (op, dtypes, scalars, out_dtype, ndim, idx, per_item)
        kernel = self._map_kernels.get(key)
        if kernel is None:
            kernel = self._map_kernels[key] = self._map_kernel(key, len(operands))
        layout = [n, out.offset]
        layout += [v.offset if isinstance(v, CLArray) else 0 for v in views]
        if ndim:
            layout += dims
            for s in collapsed:
                layout += s
        items = -(-n // per_item)
        grid = (-(-items // self.group) * self.group,)
        return kernel, self.layout(layout, idx_np), shape, n, grid

    def _map_kernel(self, key: tuple, nin: int):
        op, dtypes, scalars, out_dtype, ndim, idx, per_item = key
        args = ", ".join(f"a{i}" for i in range(nin))
        defines = [("IDX", idx), ("LAYOUT_LEN", 2 + nin + ndim * (nin + 2)), ("NIN", nin),
                   ("NDIM", ndim), ("PER_ITEM", per_item), ("TOUT", ctype(out_dtype)),
                   ("OUT_BOOL", int(out_dtype.kind == "b")), ("EXPR", f"OP_{op}({args})"),
                   ("F0", int(dtypes[0].kind == "f"))]
        for i, (dtype, scalar) in enumerate(zip(dtypes, scalars, strict=True)):
            defines += [(f"T{i}", ctype(dtype)), (f"S{i}", int(scalar))]
        return self.kernels.get("elementwise.cl", "map", tuple(defines))

    def _binary(self, name: str, op: str, a, b, out_dtype=None) -> CLArray:
        a_buffer = isinstance(a, CLArray)
        b_buffer = isinstance(b, CLArray)
        if not (a_buffer or b_buffer):
            raise TypeError(f"{name}: needs at least one buffer operand")
        dtype = a.dtype if a_buffer else b.dtype
        if a_buffer and b_buffer and a.dtype != b.dtype:
            raise DTypeError(f"{name}: operands have different dtypes {a.dtype} and {b.dtype} "
                             f"(shapes {a.shape} and {b.shape}); the core promotes first")
        operands = [a if a_buffer else _scalar(a, dtype), b if b_buffer else _scalar(b, dtype)]
        return self._map(op, operands, out_dtype or dtype, in_dtype=dtype)

    def pow(self, a, b) -> CLArray:
        if isinstance(a, CLArray) and not isinstance(b, CLArray) and a.dtype.kind == "f":
            shortcut = _POW_SHORTCUTS.get(b)
            if shortcut is not None:
                return self._map(shortcut, [a], a.dtype)
        return self._binary("pow", "POW", a, b)

    def where(self, cond: CLArray, a, b) -> CLArray:
        if isinstance(a, CLArray):
            dtype = a.dtype
        elif isinstance(b, CLArray):
            dtype = b.dtype
        else:  # two numbers: a float makes float32 (the default float), else a's own kind
            dtype = np.dtype("float32") if isinstance(a, float) else _DTYPES[np.asarray(a).dtype]
        operands = [cond] + [v if isinstance(v, CLArray) else _scalar(v, dtype) for v in (a, b)]
        return self._map("WHERE", operands, dtype, in_dtype=dtype)

    # ---- reductions and matmul (modules beside this one) -----------------------------------

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

    def permute(self, x: CLArray, axes: tuple) -> CLArray:
        return permute_view(x, tuple(axes))

    def broadcast_to(self, x: CLArray, shape: tuple) -> CLArray:
        shape = tuple(shape)
        _broadcast_shapes("broadcast_to", x.shape, shape)
        return broadcast_view(x, shape)

    def slice(self, x: CLArray, key: tuple) -> CLArray:
        return slice_view(x, tuple(key))

    def pad(self, x: CLArray, widths: tuple, value) -> CLArray:
        shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths, strict=True))
        out = self.full(shape, value, x.dtype)
        key = tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths, strict=True))
        inner = slice_view(out, key)
        self.assign(inner, x)
        return out

    def concatenate(self, xs, axis: int) -> CLArray:
        first = xs[0]
        for x in xs[1:]:
            if x.ndim != first.ndim or any(m != n for d, (m, n) in enumerate(
                    zip(x.shape, first.shape, strict=True)) if d != axis):
                raise ShapeError(f"concatenate: shapes {first.shape} and {x.shape} differ off "
                                 f"axis {axis}")
        shape = list(first.shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        out = self._new(tuple(shape), first.dtype, "concatenate")
        start = 0
        for x in xs:
            stop = start + x.shape[axis]
            key = (slice(None),) * axis + (slice(start, stop, 1),)
            self.assign(slice_view(out, key), x)
            start = stop
        return out

    def gather(self, x, index, axis):
        return indexing.gather(self, x, index, axis)

    def scatter_add(self, index, values, axis, size):
        return indexing.scatter_add(self, index, values, axis, size)

    def put(self, dst, flat_index, values):
        indexing.put(self, dst, flat_index, values)

    # ---- optional fast paths for neural networks (modules beside this one) ----------------

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
        return pool.max_pool2d(self, x, kernel_size, stride, padding, dilation, ceil_mode)

    def max_pool2d_grad(self, grad_output, indices, input_shape, kernel_size, stride, padding,
                        dilation, ceil_mode):
        return pool.max_pool2d_grad(self, grad_output, indices, tuple(input_shape), kernel_size,
                                    stride, padding, dilation, ceil_mode)

    def avg_pool2d(self, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
        return pool.avg_pool2d(self, x, kernel_size, stride, padding, ceil_mode,
                               count_include_pad)

    def avg_pool2d_grad(self, grad_output, input_shape, kernel_size, stride, padding, ceil_mode,
                        count_include_pad):
        return pool.avg_pool2d_grad(self, grad_output, tuple(input_shape), kernel_size, stride,
                                    padding, ceil_mode, count_include_pad)

    def log_softmax(self, x, axis):
        return softmax.log_softmax(self, x, axis)

    def nll_loss(self, input, target, ignore_index, reduction):
        return loss.nll_loss(self, input, target, ignore_index, reduction)

    def nll_loss_grad(self, grad_output, target, classes, ignore_index, reduction):
        return loss.nll_loss_grad(self, grad_output, target, classes, ignore_index, reduction)

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


def _broadcast_shapes(op: str, a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"{op}: shapes {a} and {b} cannot be broadcast together")
        out.append(y if x == 1 else x)
    return tuple(out)


def _unary_method(name: str, op: str):
    def method(self, x: CLArray) -> CLArray:
        return self._map(op, [x], x.dtype)

    method.__name__ = name
    return method


def _binary_method(name: str, op: str, comparison: bool):
    out_dtype = np.dtype(bool) if comparison else None

    def method(self, a, b) -> CLArray:
        return self._binary(name, op, a, b, out_dtype)

    method.__name__ = name
    return method


for _name, _op in _UNARY.items():
    setattr(OpenCLBackend, _name, _unary_method(_name, _op))
for _name, _op in _ARITHMETIC.items():
    if _name != "pow":
        setattr(OpenCLBackend, _name, _binary_method(_name, _op, False))
for _name, _op in _COMPARISON.items():
    setattr(OpenCLBackend, _name, _binary_method(_name, _op, True))
