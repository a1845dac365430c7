"""The CUDA kernels of the CuPy backend, built from the .cu sources in this folder.

Most kernels are CuPy ElementwiseKernels whose body calls a device function from a .cu file
here; the neural-network fast paths (conv.cu, pool.cu, loss.cu, optim.cu) are template
kernels taking plain pointers, compiled as one RawModule per file (`RawKernels`). CuPy
compiles a kernel with NVRTC at its first call for a given device, dtype and number of dims,
and caches the binary (in memory and under ~/.cupy/kernel_cache): kernels are built lazily,
once. A kernel that fails to compile raises ndlite's KernelBuildError with NVRTC's log. No
kernel is built with fast math (NVRTC's default: IEEE division and sqrt).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import cupy
from cupy.cuda.compiler import CompileException

from ndlite.device import KernelBuildError

SOURCES = Path(__file__).parent


@cache
def source(name: str) -> str:
    """The text of kernels/<name>.cu."""
    return (SOURCES / f"{name}.cu").read_text()


def guarded(kernel, name: str, signature: str, fallback=None):
    """`kernel` made to raise KernelBuildError (with NVRTC's log) when it fails to compile.
    The wrapper is one Python frame; CuPy still caches the binary per device and dtypes.
    `fallback(*args)` answers calls the kernel's types refuse (operands of two dtypes, which
    the contract never passes), so such a call gets NumPy's promotion instead of an error."""

    def call(*args, **kwargs):
        try:
            return kernel(*args, **kwargs)
        except CompileException as exc:
            raise KernelBuildError(
                f"cupy: CUDA kernel {name!r} ({signature}) failed to compile", log=str(exc)
            ) from None
        except TypeError:
            if fallback is None:
                raise
            return fallback(*args, **kwargs)

    call.kernel = kernel
    call.__name__ = name
    return call


def elementwise(in_params: str, out_params: str, operation: str, name: str,
                preamble: str = "", fallback=None):
    """A guarded ElementwiseKernel (see `guarded`).

    >>> relu = elementwise("T x", "T y", "y = x > 0 ? x : 0", "my_relu")  # doctest: +SKIP
    """
    kernel = cupy.ElementwiseKernel(in_params, out_params, operation, name, preamble=preamble)
    return guarded(kernel, name, f"{in_params} -> {out_params}", fallback)


def extremum(reduce_expr: str, name: str):
    """A guarded max or min ReductionKernel over kernels/reduce.cu: call it with
    `(x, axis=axes, keepdims=...)`."""
    # CuPy's CUB path renames the parameters to in0/out0 by plain text replacement (a name
    # `x` would turn ndl_extremum into ndl_ein0tremum), and adds the typedefs it needs only
    # when the names differ from in0/out0: so, names that occur nowhere else in the code
    kernel = cupy.ReductionKernel(
        "T element", "T result", "ndl_extremum<T>(element, _J)", reduce_expr,
        "result = a.value", None, name, reduce_type="ndl_extremum<T>", preamble=source("reduce"))
    return guarded(kernel, name, "T x -> T y")


#: binary primitives: (ndlite name, CuPy ufunc, expression of operands a and b)
ARITHMETIC = [("add", "add", "a + b"), ("sub", "subtract", "a - b"), ("mul", "multiply", "a * b"),
              ("div", "true_divide", "a / b"), ("pow", "power", "ndl_pow(a, b)"),
              ("maximum", "maximum", "ndl_maximum(a, b)"),
              ("minimum", "minimum", "ndl_minimum(a, b)")]
COMPARISONS = [("eq", "equal", "=="), ("ne", "not_equal", "!="), ("lt", "less", "<"),
               ("le", "less_equal", "<="), ("gt", "greater", ">"), ("ge", "greater_equal", ">=")]


class Kernels:
    """The backend's kernels, one set per process (CuPy compiles them per device).

    Binary primitives are kernels rather than CuPy's ufuncs because of Python scalars: CuPy
    follows NumPy 1's value-based casting, so a 0-d float32 array times 0.1 gives float64 (and
    int32 0-d plus 3 gives int64), where the contract says a scalar takes the buffer's dtype.
    Typed "T a, T b" parameters cast the scalar to T first, as NumPy 2 does (NEP 50).
    """

    def __init__(self):
        activations = source("elementwise")
        for name, ufunc, expression in ARITHMETIC:
            setattr(self, name, elementwise("T a, T b", "T y", f"y = {expression}",
                                            f"ndlite_{name}", activations,
                                            fallback=getattr(cupy, ufunc)))
        for name, ufunc, operator in COMPARISONS:
            setattr(self, name, elementwise("T a, T b", "bool y", f"y = a {operator} b",
                                            f"ndlite_{name}", fallback=getattr(cupy, ufunc)))
        self.max = extremum("ndl_later_max(a, b)", "ndlite_max")
        self.min = extremum("ndl_later_min(a, b)", "ndlite_min")
        self.relu = elementwise("T x", "T y", "y = ndl_relu(x)", "ndlite_relu", activations)
        # step_fallbacks.py: where(out > 0, grad, 0), and x += value, each one launch
        self.relu_grad = elementwise("T g, T out", "T y", "y = out > T(0) ? g : T(0)",
                                     "ndlite_relu_grad")
        self._add_inplace = elementwise("T v", "T x", "x = x + v", "ndlite_add_inplace")
        self.sigmoid = elementwise("T x", "T y", "y = ndl_sigmoid(x)", "ndlite_sigmoid",
                                   activations)
        self.erf = elementwise("T x", "T y", "y = erf(x)", "ndlite_erf")  # CUDA's libm erf
        self._gelu = elementwise("T x, bool tanh_form", "T y", "y = ndl_gelu(x, tanh_form)",
                                 "ndlite_gelu", activations)
        self._gelu_grad = elementwise("T g, T x, bool tanh_form", "T y",
                                      "y = ndl_gelu_grad(g, x, tanh_form)", "ndlite_gelu_grad",
                                      activations)

        indexing = source("indexing")
        self.gather = elementwise(
            "I idx, raw T x, int64 J, int64 S, int64 Q", "T out",
            "out = ndl_gather<T>(x, idx, i, J, S, Q)", "ndlite_gather", indexing)
        self.scatter_add_direct = elementwise(
            "raw T values, raw I index, int64 J, int64 S, int64 Q", "T out",
            "out = ndl_scatter_add_direct<T>(values, index, i, J, S, Q)",
            "ndlite_scatter_add_direct", indexing)
        self.scatter_key = elementwise(
            "I s, int64 J, int64 S, int64 Q", "int64 key",
            "key = ndl_scatter_key(s, i, J, S, Q)", "ndlite_scatter_key", indexing)
        self.scatter_add_sorted = elementwise(
            "raw int64 keys, raw int64 starts, raw T values, int64 J, int64 S, int64 Q",
            "T out", "out = ndl_scatter_add_sorted<T>(keys, starts, values, i, J, S, Q)",
            "ndlite_scatter_add_sorted", indexing)
        self.put_key = elementwise(
            "I position, int64 n", "int64 key", "key = ndl_put_key(position, i, n)",
            "ndlite_put_key", indexing)
        self.put_last = elementwise(
            "raw int64 keys, raw T values, int64 n", "raw T dst",
            "ndl_put_last(keys, values, dst, i, n)", "ndlite_put_last", indexing)

    def add_scalar_inplace(self, x, value):
        self._add_inplace(x.dtype.type(value), x)

    # the contract's gelu fast paths (one pass each; approximate is "none" or "tanh")
    def gelu(self, x, approximate):
        return self._gelu(x, approximate == "tanh")

    def gelu_grad(self, grad, x, approximate):
        return self._gelu_grad(grad, x, approximate == "tanh")


#: C++ names of the element types and index types the raw kernels are instantiated for
CXX_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long"}


class RawKernels:
    """The template kernels of kernels/<name>.cu, instantiated for float and double (and, with
    `indexed`, for int and long long indices), compiled together by NVRTC at first use (CuPy
    caches the binary per device and on disk). `get("ndl_im2col", "float32", "int32")` is the
    launchable kernel; a compile error raises KernelBuildError with NVRTC's log."""

    def __init__(self, name: str, kernels: tuple, indexed: tuple = ()):
        self.name = name
        expressions = []
        for kernel in kernels:
            for t in ("float", "double"):
                if kernel in indexed:
                    expressions += [f"{kernel}<{t}, int>", f"{kernel}<{t}, long long>"]
                else:
                    expressions.append(f"{kernel}<{t}>")
        self.module = cupy.RawModule(code=source(name), name_expressions=tuple(expressions))
        self._functions: dict = {}

    def get(self, kernel: str, *types: str):
        key = (kernel, *types)
        function = self._functions.get(key)
        if function is None:
            expression = f"{kernel}<{', '.join(CXX_TYPES[t] for t in types)}>"
            try:
                function = self.module.get_function(expression)
                function.compile()  # now, so that a build error surfaces here with its log
            except CompileException as exc:
                raise KernelBuildError(f"cupy: CUDA kernel {expression!r} in kernels/"
                                       f"{self.name}.cu failed to compile", log=str(exc)) from None
            self._functions[key] = function
        return function


@cache
def raw(name: str) -> RawKernels:
    """The RawKernels of kernels/<name>.cu (see RAW_KERNELS)."""
    kernels, indexed = RAW_KERNELS[name]
    return RawKernels(name, kernels, indexed)


#: the kernels of columns.cu, every one instantiated for an index type too
COLUMNS = ("ndl_column_partial", "ndl_column_direct", "ndl_column_finish",
           "ndl_channel_partial", "ndl_channel_direct", "ndl_row_sum")
#: file -> (its kernels, those of them that take an index type as well as an element type)
RAW_KERNELS = {
    "conv": (("ndl_im2col", "ndl_col2im", "ndl_swap01", "ndl_channel_bias"),
             ("ndl_im2col", "ndl_col2im", "ndl_swap01", "ndl_channel_bias")),
    "pool": (("ndl_max_pool", "ndl_max_pool_grad", "ndl_avg_pool", "ndl_avg_pool_grad"),
             ("ndl_max_pool", "ndl_max_pool_grad", "ndl_avg_pool", "ndl_avg_pool_grad")),
    "loss": (("ndl_log_softmax", "ndl_nll_loss", "ndl_nll_count", "ndl_nll_loss_grad",
              "ndl_log_softmax_grad"), ("ndl_log_softmax", "ndl_nll_loss_grad",
                                        "ndl_log_softmax_grad")),
    "optim": (("ndl_sgd_step", "ndl_rmsprop_step", "ndl_adam_step", "ndl_sgd_steps",
               "ndl_rmsprop_steps", "ndl_adam_steps"), ()),
    "columns": (COLUMNS, COLUMNS),
}

#: threads per block of the raw kernels, and the most blocks a grid-stride launch uses
THREADS = 256
MAX_BLOCKS = 8192


def launch(function, count: int, args: tuple) -> None:
    """Launch a grid-stride kernel over `count` elements on the current stream."""
    blocks = min(max(1, -(-count // THREADS)), MAX_BLOCKS)
    function((blocks,), (THREADS,), args)


@cache
def kernels() -> Kernels:
    """The kernel set (built on first use; compiling waits for each kernel's first call)."""
    return Kernels()
