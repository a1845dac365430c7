"""The CUDA kernels of the CuPy backend, built from the sources in kernels/*.cu.

Each kernel is a CuPy ElementwiseKernel whose body calls a device function from a .cu file
beside this one. CuPy compiles a kernel with NVRTC at its first call for a given device, dtype
and number of dims, and caches the binary (in memory and under ~/.cupy/kernel_cache): kernels
are built lazily, once. A kernel that fails to compile raises ndlite's KernelBuildError with
NVRTC's log. No kernel is built with fast math (NVRTC's default: IEEE division and sqrt).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import cupy
from cupy.cuda.compiler import CompileException

from ndlite.device import KernelBuildError

SOURCES = Path(__file__).with_name("kernels")


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
        self.sigmoid = elementwise("T x", "T y", "y = ndl_sigmoid(x)", "ndlite_sigmoid",
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


@cache
def kernels() -> Kernels:
    """The kernel set (built on first use; compiling waits for each kernel's first call)."""
    return Kernels()
