"""The CuPy backend's raw CUDA kernels (backends/ndlite_cupy/kernels/{conv,pool,loss,optim,
transformer}.cu) and the Python that launches them (nn.py, optim.py, transformer.py), run on the
CPU: the .cu files compile as
host C++ (each grid-stride loop then runs in one "thread"), CuPy is stood in for by NumPy, and
every kernel argument is checked against the C signature as CuPy would pack it. Results are
compared with the reference fallbacks: convolution over random geometries (strides, padding,
dilation, groups), pooling bitwise, log_softmax, nll_loss, the optimizer steps bitwise, and the
transformer fast paths (embedding_grad's segment sums, layer_norm, causal softmax). The
warp-per-row kernels of transformer.cu run here with one lane per warp, so their shuffle
butterflies are trivial: their multi-lane reductions are checked on a GPU only
(tests/backends/test_transformer_fast_paths.py).

So CI, which has no GPU, still checks the kernels' index arithmetic and launch arguments. Needs
g++, nm and c++filt; skipped, saying why, without them. The work runs in a subprocess, so the
stand-in `cupy` module never meets the rest of the test session.
"""

import ctypes
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "backends" / "ndlite_cupy" / "kernels"
TOOLS = ("g++", "nm", "c++filt")

HOST = """// host emulation: one block of one thread runs every grid-stride loop
#include <cmath>
using std::exp; using std::log; using std::sqrt;
struct ndl_dim3 { unsigned x, y, z; };
static ndl_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1},
                gridDim = {1, 1, 1};
#define __global__
#define __shared__ static
#define __host__
#define __device__
inline void __syncthreads() {}
// a warp of one lane: a shuffle reads the caller's own value
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int) { return v; }
template <typename T> inline T __shfl_sync(unsigned, T v, int) { return v; }
"""
INDEXED = ["ndl_im2col", "ndl_col2im", "ndl_swap01", "ndl_max_pool", "ndl_max_pool_grad",
           "ndl_avg_pool", "ndl_avg_pool_grad", "ndl_log_softmax", "ndl_nll_loss_grad",
           "ndl_segment_chunks", "ndl_segment_rows", "ndl_layer_norm", "ndl_layer_norm_grad",
           "ndl_layer_norm_columns", "ndl_column_total", "ndl_causal_softmax",
           "ndl_causal_softmax_grad", "ndl_channel_bias", "ndl_log_softmax_grad"]
TYPED = ["ndl_nll_loss", "ndl_nll_count", "ndl_sgd_step", "ndl_rmsprop_step", "ndl_adam_step"]


def build(directory: Path) -> Path:
    """The kernels compiled into a shared library of host code."""
    source = HOST + "".join(f'#include "{KERNELS / name}.cu"\n'
                            for name in ("conv", "pool", "loss", "optim", "transformer"))
    for k in INDEXED:  # taking the addresses instantiates the templates
        source += (f"void* {k}_p[] = {{(void*)&{k}<float, int>, (void*)&{k}<float, long long>,"
                   f" (void*)&{k}<double, int>, (void*)&{k}<double, long long>}};\n")
    for k in TYPED:
        source += f"void* {k}_p[] = {{(void*)&{k}<float>, (void*)&{k}<double>}};\n"
    (directory / "host.cpp").write_text(source)
    library = directory / "libkernels.so"
    subprocess.run(["g++", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-o", str(library),
                    str(directory / "host.cpp")], check=True, capture_output=True, text=True)
    return library


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                    reason=f"needs {', '.join(TOOLS)} to build the kernels as host code")
def test_kernels_and_their_launches_match_the_reference_on_the_cpu(tmp_path):
    library = build(tmp_path)
    run = subprocess.run([sys.executable, __file__, str(library)], capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "all kernels match" in run.stdout


# ---- the subprocess: stand-in cupy, kernels from the host library -----------------------------

SCALARS = {"int": (np.int32, ctypes.c_int32), "long long": (np.int64, ctypes.c_int64),
           "double": (np.float64, ctypes.c_double), "bool": (np.bool_, ctypes.c_bool),
           "float": (np.float32, ctypes.c_float)}
POINTEES = {"float": np.float32, "double": np.float64, "long long": np.int64}
CXX = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long"}


class HostKernel:
    """A kernel of the host library, called as CuPy calls a RawKernel."""

    def __init__(self, library, signatures, expression):
        self.expression = expression
        mangled, self.params = signatures[expression]
        self.function = getattr(library, mangled)
        self.function.restype = None

    def __call__(self, grid, block, args):
        assert len(args) == len(self.params), (self.expression, args)
        c_args = []
        for arg, param in zip(args, self.params, strict=True):
            if param.endswith("*"):
                if arg is None:
                    c_args.append(ctypes.c_void_p(None))
                    continue
                pointee = param.replace("const", "").replace("*", "").strip()
                assert isinstance(arg, np.ndarray) and arg.flags.c_contiguous, self.expression
                assert arg.dtype == POINTEES[pointee], (self.expression, param, arg.dtype)
                c_args.append(ctypes.c_void_p(arg.ctypes.data))
            else:
                numpy_type, c_type = SCALARS[param]
                assert type(arg) is numpy_type, (self.expression, param, type(arg))
                c_args.append(c_type(arg.item()))
        self.function(*c_args)


def install_stand_ins(library_path: str) -> None:
    library = ctypes.CDLL(library_path)
    names = subprocess.run(["nm", "-D", "--defined-only", library_path], capture_output=True,
                           text=True, check=True).stdout.split()[2::3]
    plain = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                           text=True, check=True).stdout.split("\n")
    signatures = {}
    for mangled, name in zip(names, plain):
        match = re.match(r"void (ndl_\w+<[^>]*>)\((.*)\)$", name)
        if match:
            signatures[match.group(1)] = (mangled, [p.strip() for p in match.group(2).split(",")])

    def matmul(a, b, out=None):
        return np.matmul(a, b, out=out) if out is not None else np.matmul(a, b)

    cupy = types.ModuleType("cupy")
    cupy.empty = lambda shape, dtype=np.float32: np.full(  # poisoned: unwritten shows
        shape, np.nan if np.dtype(dtype).kind == "f" else -7, dtype=dtype)
    cupy.ascontiguousarray = lambda a, dtype=None: np.ascontiguousarray(a, dtype=dtype)
    cupy.matmul = matmul
    for name in ("arange", "sort", "searchsorted", "cumsum", "concatenate"):
        setattr(cupy, name, getattr(np, name))
    sys.modules["cupy"] = cupy
    sys.path[:0] = [str(ROOT / "backends"), str(ROOT)]
    import ndlite_cupy  # noqa: F401  (the package, before its modules are stood in for)

    class Raw:
        def get(self, kernel, *types_):
            expression = f"{kernel}<{', '.join(CXX[t] for t in types_)}>"
            return HostKernel(library, signatures, expression)

    kernels = types.ModuleType("ndlite_cupy.kernels")
    kernels.raw = lambda name: Raw()
    kernels.RawKernels = lambda name, kernels_, indexed: Raw()
    kernels.launch = lambda function, count, args: function((1,), (1,), args)
    blas = types.ModuleType("ndlite_cupy.blas")
    blas.matmul = matmul
    sys.modules["ndlite_cupy.kernels"], sys.modules["ndlite_cupy.blas"] = kernels, blas


def check_all() -> None:
    from ndlite_cupy import layers, nn, optim, transformer

    from ndlite.device import fallbacks, get_backend
    from ndlite.device import transformer_fallbacks as tfb

    b = get_backend("numpy")
    b._optimizer_table = None  # optim.py asks the backend whether a graph is being recorded
    b._cudnn = None  # nn.py asks the backend for its cuDNN convolutions (cudnn.py): none here
    r = np.random.default_rng(0)
    check_conv(nn, fallbacks, b, r)
    check_cudnn_routing(nn, fallbacks, b, r)
    check_pool(nn, fallbacks, b, r)
    check_loss(nn, fallbacks, b, r)
    check_layers(layers, fallbacks, b, r)
    check_optim(optim, fallbacks, b, r)
    check_transformer(transformer, tfb, b, r)
    print("all kernels match")


def same(actual, expected, what, exact):
    expected = np.asarray(expected)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    if exact:
        assert np.array_equal(actual, expected, equal_nan=True), what
        assert np.array_equal(np.signbit(actual), np.signbit(expected)), what
    else:
        tol = 1e-4 if actual.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, err_msg=what)


def check_conv(nn, fallbacks, b, r):
    for trial in range(120):
        dtype = (np.float32, np.float64)[trial % 2]
        groups, cg, og = (int(v) for v in r.integers(1, [4, 3, 3]))
        kh, kw, sh, sw = (int(v) for v in r.integers(1, 4, 4))
        (dh, dw), (ph, pw) = r.integers(1, 3, 2).tolist(), r.integers(0, 3, 2).tolist()
        h = int(r.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 9))
        w = int(r.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 9))
        x = r.standard_normal((int(r.integers(1, 3)), groups * cg, h, w)).astype(dtype)
        weight = r.standard_normal((groups * og, cg, kh, kw)).astype(dtype)
        geometry = ((sh, sw), (ph, pw), (dh, dw), groups)
        y = nn.conv2d(b, x, weight, *geometry)
        same(y, fallbacks.conv2d(b, x, weight, *geometry), f"conv2d {geometry}", False)
        g = r.standard_normal(y.shape).astype(dtype)
        same(nn.conv2d_grad_input(b, g, weight, x.shape, *geometry),
             fallbacks.conv2d_grad_input(b, g, weight, x.shape, *geometry), "grad_input", False)
        same(nn.conv2d_grad_weight(b, x, g, weight.shape, *geometry),
             fallbacks.conv2d_grad_weight(b, x, g, weight.shape, *geometry), "grad_weight", False)


def check_cudnn_routing(nn, fallbacks, b, r):
    """nn.py asks cuDNN (cudnn.py) first and returns its result; what cuDNN declines runs on
    the kernels, halves there on float32 copies rounded once."""

    class Stand:  # a cudnn.Convolutions that notes each dtype and declines all but float64
        seen = []

        def fprop(self, a, *args):
            self.seen.append(a.dtype)
            return "cudnn" if a.dtype == np.float64 else None

        dgrad = wgrad = fprop

    b._cudnn, b._recording = Stand(), None
    x = r.standard_normal((2, 4, 7, 6)).astype(np.float16)
    weight = r.standard_normal((6, 2, 3, 3)).astype(np.float16)
    geometry = ((1, 2), (1, 0), (1, 1), 2)
    y = nn.conv2d(b, x, weight, *geometry)
    g = r.standard_normal(y.shape).astype(np.float16)
    grads = (nn.conv2d_grad_input(b, g, weight, x.shape, *geometry),
             nn.conv2d_grad_weight(b, x, g, weight.shape, *geometry))
    up = [a.astype(np.float32) for a in (x, weight, g)]
    expected = (fallbacks.conv2d(b, up[0], up[1], *geometry),
                fallbacks.conv2d_grad_input(b, up[2], up[1], x.shape, *geometry),
                fallbacks.conv2d_grad_weight(b, up[0], up[2], weight.shape, *geometry))
    for got, want in zip((y, *grads), expected, strict=True):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    assert Stand.seen == [np.float16, np.float32] * 3  # the half call, then its float32 copy
    assert nn.conv2d(b, x.astype(np.float64), weight.astype(np.float64), *geometry) == "cudnn"
    b._cudnn = None


def check_pool(nn, fallbacks, b, r):
    for trial in range(200):
        dtype = (np.float32, np.float64)[trial % 2]
        kernel, stride, dilation = (tuple(r.integers(lo, hi, 2).tolist())
                                    for lo, hi in ((1, 4), (1, 4), (1, 3)))
        padding = (int(r.integers(0, kernel[0] // 2 + 1)), int(r.integers(0, kernel[1] // 2 + 1)))
        ceil_mode = bool(trial % 3 == 0)
        shape = (1, 2) + tuple(int(r.integers(max(1, d * (k - 1) + 1 - 2 * p), 10))
                               for k, d, p in zip(kernel, dilation, padding, strict=True))
        sizes = [(fallbacks.pool_output_size(n, k, s, p, d, ceil_mode), n, k, s, p, d)
                 for n, k, s, p, d in zip(shape[2:], kernel, stride, padding, dilation,
                                          strict=True)]
        if any(o < 1 or fallbacks.empty_windows(n, k, s, p, d, o) for o, n, k, s, p, d in sizes):
            continue
        x = r.integers(-3, 4, shape).astype(dtype)  # ties: the first maximum must win
        args = (kernel, stride, padding, dilation, ceil_mode)
        values, indices = nn.max_pool2d(b, x, *args)
        ref_values, ref_indices = fallbacks.max_pool2d(b, x, *args)
        same(values, ref_values, f"max_pool {shape} {args}", True)
        same(indices, ref_indices, f"max_pool indices {shape} {args}", True)
        g = r.standard_normal(values.shape).astype(dtype)
        same(nn.max_pool2d_grad(b, g, indices, shape, *args),
             fallbacks.max_pool2d_grad(b, g, ref_indices, shape, *args), "max_pool_grad", True)
        if dilation == (1, 1):
            for count_include_pad in (True, False):
                args = (kernel, stride, padding, ceil_mode, count_include_pad)
                xa = r.standard_normal(shape).astype(dtype)
                out = nn.avg_pool2d(b, xa, *args)
                same(out, fallbacks.avg_pool2d(b, xa, *args), f"avg_pool {args}", True)
                ga = r.standard_normal(out.shape).astype(dtype)
                same(nn.avg_pool2d_grad(b, ga, shape, *args),
                     fallbacks.avg_pool2d_grad(b, ga, shape, *args), "avg_pool_grad", True)


def check_loss(nn, fallbacks, b, r):
    for shape, axis in [((4, 10), 1), ((3, 5, 2), 1), ((2, 3, 4), 0), ((7,), 0)]:
        x = (r.standard_normal(shape) * 3).astype(np.float32)
        same(nn.log_softmax(b, x, axis), fallbacks.log_softmax(b, x, axis), "log_softmax", False)

    for dtype in (np.float32, np.float64):
        for reduction in ("none", "sum", "mean"):
            x = r.standard_normal((37, 5)).astype(dtype)
            target = r.integers(0, 5, 37)
            target[::5] = 2
            args = (2, reduction)
            same(nn.nll_loss(b, x, target, *args), fallbacks.nll_loss(b, x, target, *args),
                 f"nll_loss {reduction}", False)
            g = r.standard_normal((37,) if reduction == "none" else ()).astype(dtype)
            same(nn.nll_loss_grad(b, g, target, 5, *args),
                 fallbacks.nll_loss_grad(b, g, target, 5, *args), f"nll_loss_grad {reduction}",
                 True)


def check_layers(layers, fallbacks, b, r):
    """layers.py's conv2d_bias (the bias kernel: the fallback's bits) and log_softmax_grad."""
    from ndlite.device import step_fallbacks as sfb

    for dtype in (np.float32, np.float64):
        x = r.standard_normal((2, 3, 6, 5)).astype(dtype)
        weight, bias = (r.standard_normal(s).astype(dtype) for s in ((4, 3, 3, 2), (4,)))
        geometry = ((1, 2), (1, 0), (1, 1), 1)
        x[0, 0, :2, :2] = [[np.nan, 0.0], [-0.0, np.inf]]
        for relu in (False, True):
            same(layers.conv2d_bias(b, x, weight, bias, *geometry, relu),
                 sfb.conv2d_bias(b, x, weight, bias, *geometry, relu), "conv2d_bias", True)
        for shape, axis in [((4, 10), 1), ((3, 5, 2), 1), ((2, 3, 4), 0), ((7,), 0)]:
            y = fallbacks.log_softmax(b, (r.standard_normal(shape) * 3).astype(dtype), axis)
            g = r.standard_normal(shape).astype(dtype)
            same(layers.log_softmax_grad(b, g, y, axis), sfb.log_softmax_grad(b, g, y, axis),
                 "log_softmax_grad", False)


def check_optim(optim, fallbacks, b, r):
    steps = {
        "sgd": lambda m, p, g, s, t: m.sgd_step(b, p, g, s[0], 0.05, 0.9, 0.1, False, 1e-3,
                                                t == 1),
        "nesterov": lambda m, p, g, s, t: m.sgd_step(b, p, g, s[0], 0.05, 0.9, 0.0, True, 0.0,
                                                     t == 1),
        "rmsprop": lambda m, p, g, s, t: m.rmsprop_step(b, p, g, s[0], s[1], s[2], 1e-2, 0.9,
                                                        1e-6, 0.5, 1e-2),
        "adamw_amsgrad": lambda m, p, g, s, t: m.adam_step(b, p, g, s[0], s[1], s[2], t, 1e-3,
                                                           0.9, 0.999, 1e-8, 1e-2, True),
        "adam_l2": lambda m, p, g, s, t: m.adam_step(b, p, g, s[0], s[1], None, t, 1e-2, 0.8,
                                                     0.99, 1e-6, 0.1, False),
    }
    for dtype in (np.float32, np.float64):
        for name, step in steps.items():
            start = r.standard_normal(50).astype(dtype)
            sides = [(start.copy(), [np.zeros(50, dtype) for _ in range(3)]) for _ in range(2)]
            for t in range(1, 5):
                g = r.standard_normal(50).astype(dtype)
                for module, (param, state) in zip((optim, fallbacks), sides, strict=True):
                    step(module, param, g, state, t)
                same(sides[0][0], sides[1][0], f"{name} step {t}", True)


def check_transformer(tr, tfb, b, r):
    # (positions, width, rows, largest index): heavy repeats (one row, a few), odd widths,
    # rows no index names, one position
    for n, d, rows, top in [(1000, 7, 5, 3), (300, 33, 100, 100), (200, 1, 2, 1), (1, 3, 1, 1),
                            (31, 5, 4, 4), (65, 2, 3, 1)]:
        for dtype in (np.float32, np.float64):
            grad = r.standard_normal((n, d)).astype(dtype)
            index = r.integers(0, top, n).astype(np.int64)
            got, want = tr.embedding_grad(b, grad, index, rows), tfb.embedding_grad(
                b, grad, index, rows)
            # a row named at most CHUNK times is one chunk: the fallback's order exactly
            short = np.bincount(index, minlength=rows).max() <= tr.CHUNK
            same(got, want, f"embedding_grad {n, d, rows}", short)
    for shape, affine in [((5, 7), True), ((1, 1), False), ((3, 300), True), ((4, 2), False)]:
        for dtype in (np.float32, np.float64):
            x = (r.standard_normal(shape) * 3 + 1).astype(dtype)
            w, bias = (r.standard_normal(shape[1:]).astype(dtype) if affine else None
                       for _ in range(2))
            got, want = tr.layer_norm(b, x, w, bias, 1e-5), tfb.layer_norm(b, x, w, bias, 1e-5)
            for g, e, what in zip(got, want, ("y", "mean", "rstd"), strict=True):
                same(g, e, f"layer_norm {what} {shape}", False)
            gy = r.standard_normal(shape).astype(dtype)
            args = (gy, x, w, want[1], want[2], affine)
            for g, e, what in zip(tr.layer_norm_grad(b, *args), tfb.layer_norm_grad(b, *args),
                                  ("x", "weight", "bias"), strict=True):
                assert (g is None) == (e is None), what
                if g is not None:
                    same(g, e, f"layer_norm_grad {what} {shape}", False)
    for shape in [(2, 5, 7), (3, 7, 5), (1, 1), (2, 1, 4), (4, 1)]:
        for dtype in (np.float32, np.float64):
            x = (r.standard_normal(shape) * 2).astype(dtype)
            out = tr.causal_softmax(b, x, 0.37)
            same(out, tfb.causal_softmax(b, x, 0.37), f"causal_softmax {shape}", False)
            g = r.standard_normal(shape).astype(dtype)
            same(tr.causal_softmax_grad(b, g, out, 0.37),
                 tfb.causal_softmax_grad(b, g, out, 0.37), f"causal_softmax_grad {shape}", False)


if __name__ == "__main__":
    install_stand_ins(sys.argv[1])
    check_all()
