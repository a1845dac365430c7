"""The batch-norm fast paths (protocol.FAST_PATHS: batch_norm, batch_norm_grad) on every
available backend (numpy, opencl; cupy skipped without a GPU): each against float64 NumPy math
(the tolerance policy), against the contract's composed fallback (ndlite/device/
norm_fallbacks.py), and against itself run to run (bitwise); halves against float32 math
rounded once, with the statistics kept float32. Then F.batch_norm, which runs them in
training: its values, gradients and running statistics against float64 NumPy, its first and
second derivatives (composed while create_graph builds a graph) by finite differences, and
PyTorch where it is installed.

On OpenCL the work-group trees, the chunk walks, the plane kernels' 2-D groups and the
chunk combination run with forced group sizes and small chunks (PoCL on a CPU otherwise uses
one item per group and one chunk for small inputs). The CUDA kernels (backends/ndlite_cupy/
kernels/norm.cu) and the Python launching them also run on the CPU as host C++ through
tests/backends/test_cupy_kernels_on_cpu.py's stand-in CuPy, one thread per block, so CI checks
their index arithmetic and arguments; host drivers also run each thread's chunk walk at GPU
step sizes and the plane kernels with real (tx, ty) blocks, thread by thread, and the chunk
kernels' shared-memory trees run with a std::thread per CUDA thread and a barrier for
__syncthreads (warp-level timing and the real compiler are left to a GPU).
"""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite.device import norm_fallbacks as nfb
from ndlite.dtypes import HALF
from ndlite.testing.gradcheck import gradcheck, gradgradcheck
from ndlite.testing.tolerance import judge

FLOATS = ("float32", "float64")
EPS = 1e-5
#: (N, C, *): 2-D, 3-D, 4-D, odd sizes, one channel, channels of more values than a chunk
SHAPES = [(7, 3), (2, 5), (4, 3, 9), (2, 3, 5, 7), (3, 1, 1, 1), (1, 4, 3), (16, 8, 6, 6),
          (5000, 3), (2, 2, 70, 50), (3, 2, 1, 2, 5)]


def dtypes(b):
    return [d for d in FLOATS if np.dtype(d) in b.dtypes]


def host(b, x):
    return None if x is None else b.to_numpy(x)


def dev(b, a):
    return None if a is None else b.from_numpy(np.ascontiguousarray(a))


def same_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    assert np.array_equal(got.view(bits), want.view(bits)), what


def close(got, ref, dtype, roundings, what, terms=0.0):
    """|got - ref| within the policy's transcendental bound, S the array's largest magnitude
    plus the element's own (normalizations: errors scale with the channel, not the element)
    plus `terms`, the size of what a result is the difference of."""
    scale = np.abs(ref) + (np.abs(ref).max() if ref.size else 0.0) + terms
    verdict = judge(got, ref, "transcendental", dtype, scale=scale, roundings=roundings)
    assert verdict.ok, f"{what}: {verdict.message}"


def batch_norm64(x, w, bias, g, eps=EPS):
    """Forward (y, mean, invstd, var) and backward (grad_x, grad_weight, grad_bias) in
    float64, and the size of the terms grad_x is a difference of."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    m = x.size // x.shape[1]
    mean, var = x.mean(axes), x.var(axes)
    invstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    scale = invstd * (1 if w is None else w)
    y = xhat * (1 if w is None else w.reshape(shape)) + (0 if bias is None else
                                                         bias.reshape(shape))
    sum_dy, sum_dy_xhat = g.sum(axes), (g * xhat).sum(axes)
    gx = scale.reshape(shape) * (g - sum_dy.reshape(shape) / m
                                 - xhat * sum_dy_xhat.reshape(shape) / m)
    terms = np.abs(scale).reshape(shape) * (np.abs(g) + np.abs(g).mean(axes, keepdims=True))
    return (y, mean, invstd, var), (gx, sum_dy_xhat, sum_dy), terms


def _case(shape, dtype, affine, seed):
    r = np.random.default_rng(seed)
    x = (r.standard_normal(shape) * 3 + 2).astype(dtype)
    w, bias = ((r.standard_normal(shape[1]).astype(dtype) if affine else None)
               for _ in range(2))
    return x, w, bias, r.standard_normal(shape).astype(dtype)


# ---- the fast paths ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_forward_and_backward(backend, shape, affine):
    b = backend
    m = int(np.prod(shape)) // shape[1]
    for dtype in dtypes(b):
        x, w, bias, g = _case(shape, dtype, affine, m + shape[1])
        forward, backward, terms = batch_norm64(x, w, bias, g)
        args = (dev(b, x), dev(b, w), dev(b, bias), EPS)
        out = b.batch_norm(*args)
        composed = nfb.batch_norm(b, *args)
        for impl in (out, composed):
            for got, ref, what in zip(impl, forward, ("y", "mean", "invstd", "var"), strict=True):
                assert host(b, got).dtype == np.dtype(dtype), what
                close(host(b, got), ref, dtype, m + 8, f"batch_norm {what}")
        for one, two in zip(out, b.batch_norm(*args), strict=True):
            same_bits(host(b, two), host(b, one), "batch_norm run to run")
        y, mean, invstd, _ = out
        grad_args = (dev(b, g), args[0], args[1], mean, invstd, affine)
        first = b.batch_norm_grad(*grad_args)
        for impl in (first, nfb.batch_norm_grad(b, *grad_args)):
            for got, ref, what in zip(impl, backward, ("x", "weight", "bias"), strict=True):
                if what != "x" and not affine:
                    assert got is None, what
                    continue
                close(host(b, got), ref, dtype, 2 * m + 16, f"batch_norm_grad {what}",
                      terms if what == "x" else 0.0)
        for one, two in zip(first, b.batch_norm_grad(*grad_args), strict=True):
            if one is not None:
                same_bits(host(b, two), host(b, one), "batch_norm_grad run to run")


def test_batch_norm_takes_views_and_broadcast_gradients(backend):
    b = backend
    r = np.random.default_rng(1)
    base = r.standard_normal((6, 4, 5)).astype(np.float32)
    view = b.permute(dev(b, base), (2, 1, 0))  # (5, 4, 6), not contiguous
    x = np.ascontiguousarray(base.transpose(2, 1, 0))
    ones = b.broadcast_to(b.full((1, 1, 1), 1.0, np.dtype(np.float32)), x.shape)
    y, mean, invstd, var = b.batch_norm(view, None, None, EPS)
    (want_y, *stats), (want_gx, _, want_gb), terms = batch_norm64(x, None, None, np.ones(x.shape))
    close(host(b, y), want_y, np.float32, 40, "y of a view")
    gx, gw, gb = b.batch_norm_grad(ones, view, None, mean, invstd, True)
    assert gw is None
    close(host(b, gx), want_gx, np.float32, 80, "grad_x of ones", terms)
    close(host(b, gb), want_gb, np.float32, 80, "grad_bias of ones")


@pytest.mark.parametrize("shape", [(16, 8, 6, 6), (4, 3, 9), (9, 5)], ids=str)
def test_batch_norm_halves_compute_in_float32(backend, shape):
    b = backend
    halves = [d for d in HALF if d in b.dtypes]
    if not halves:
        pytest.skip(f"{b.name} has no half dtypes")
    for half in halves:
        x, w, bias, g = _case(shape, np.float32, True, 3)
        x, w, bias, g = (a.astype(half) for a in (x, w, bias, g))
        wide = [a.astype(np.float32) for a in (x, w, bias, g)]
        forward, backward, terms = batch_norm64(*wide)
        args = (dev(b, x), dev(b, w), dev(b, bias), EPS)  # (the first half arms halfmath)
        out = b.batch_norm(*args)
        assert [host(b, o).dtype for o in out] == [np.dtype(half)] + [np.dtype("float32")] * 3
        m = x.size // shape[1]
        for got, ref, what in zip(out, forward, ("y", "mean", "invstd", "var"), strict=True):
            close(host(b, got).astype(np.float32), ref, half if what == "y" else np.float32,
                  m + 8, f"{half} batch_norm {what}")
        grads = b.batch_norm_grad(dev(b, g), dev(b, x), dev(b, w), out[1], out[2], True)
        for got, ref, what in zip(grads, backward, ("x", "weight", "bias"), strict=True):
            assert host(b, got).dtype == np.dtype(half), what
            close(host(b, got).astype(np.float32), ref, half, 2 * m + 16,
                  f"{half} batch_norm_grad {what}", terms if what == "x" else 0.0)
        again = b.batch_norm_grad(dev(b, g), dev(b, x), dev(b, w), out[1], out[2], True)
        for one, two in zip(grads, again, strict=True):
            same_bits(host(b, two), host(b, one), f"{half} batch_norm_grad run to run")


@pytest.mark.parametrize("group", [4, 64])
def test_opencl_chunks_and_work_group_trees(backend, monkeypatch, group):
    if backend.kind != "opencl":
        pytest.skip("OpenCL only")
    from ndlite_opencl import norm

    monkeypatch.setattr(norm, "_group", lambda b, per: group)
    monkeypatch.setattr(norm, "_plane_group", lambda b, s: (group, 3))
    monkeypatch.setattr(norm, "CHUNK_MIN", 37)  # several chunks per channel, the last short
    b = backend
    for shape in [(16, 3, 5, 5), (300, 2), (5, 4, 9), (3, 2, 150)]:
        for dtype in dtypes(b):
            x, w, bias, g = _case(shape, dtype, True, group)
            forward, backward, terms = batch_norm64(x, w, bias, g)
            m = x.size // shape[1]
            out = b.batch_norm(dev(b, x), dev(b, w), dev(b, bias), EPS)
            for got, ref in zip(out, forward, strict=True):
                close(host(b, got), ref, dtype, m + 8, f"batch_norm {shape} {group}")
            grads = b.batch_norm_grad(dev(b, g), dev(b, x), dev(b, w), out[1], out[2], True)
            for got, ref, what in zip(grads, backward, ("x", "w", "b"), strict=True):
                close(host(b, got), ref, dtype, 2 * m + 16, f"batch_norm_grad {what} {shape}",
                      terms if what == "x" else 0.0)


# ---- F.batch_norm ---------------------------------------------------------------------------


def _op_case(b, dtype, shape=(6, 3, 4, 5)):
    r = np.random.default_rng(4)
    arrays = [r.standard_normal(shape) * 2 + 1, r.standard_normal(shape[1]),
              r.standard_normal(shape[1]), r.standard_normal(shape)]
    return [a.astype(dtype) for a in arrays]


@pytest.mark.parametrize("momentum", [0.1, 0.25, 1.0, 0.0])
def test_running_statistics_update_is_the_fallbacks_bits(backend, momentum):
    """batch_norm_update against the contract's fallback (bitwise: each product and sum
    rounded in the buffers' dtype, no fused multiply-add) and the formula in float64; the
    running buffers are written in place, the batch statistics left alone."""
    b = backend
    if b.kind in ("cupy", "opencl"):  # their own one-launch kernels, not the fallback
        assert b._norm_kernels.batch_norm_update is not nfb.batch_norm_update
    r = np.random.default_rng(7)
    for dtype in dtypes(b):
        arrays = [(r.standard_normal(37) * s + o).astype(dtype)
                  for s, o in ((1, 0), (1, 2), (3, 1), (2, 4))]
        arrays[1], arrays[3] = np.abs(arrays[1]), np.abs(arrays[3])
        results = []
        for update in (b.batch_norm_update, lambda *a: nfb.batch_norm_update(b, *a)):
            rm, rv, mean, var = (dev(b, a) for a in arrays)
            update(rm, rv, mean, var, momentum, 1000)
            results.append((host(b, rm), host(b, rv)))
            np.testing.assert_array_equal(host(b, mean), arrays[2])
            np.testing.assert_array_equal(host(b, var), arrays[3])
        for got, want, what in zip(results[0], results[1], ("running_mean", "running_var")):
            same_bits(got, want, f"{what} {dtype}")
        rm, rv, mean, var = (a.astype(np.float64) for a in arrays)
        close(results[0][0], rm * (1 - momentum) + mean * momentum, dtype, 4, "mean")
        close(results[0][1], rv * (1 - momentum) + var * 1000 / 999 * momentum, dtype, 5,
              "var")


@pytest.mark.parametrize("affine", [True, False])
def test_the_op_in_training_values_gradients_and_running_statistics(backend, affine):
    b = backend
    for dtype in dtypes(b):
        x, w, bias, g = _op_case(b, dtype)
        ts = [ndlite.tensor(a, backend=b, requires_grad=True) for a in (x, w, bias)]
        rm = ndlite.tensor(np.full(3, 0.5, dtype), backend=b)
        rv = ndlite.tensor(np.full(3, 2.0, dtype), backend=b)
        weight, beta = (ts[1], ts[2]) if affine else (None, None)
        out = F.batch_norm(ts[0], rm, rv, weight, beta, training=True, momentum=0.25)
        assert out._node is not None and out._node.op.name == "batch_norm"  # the fused op
        (out * ndlite.tensor(g, backend=b)).sum().backward()
        forward, backward, terms = batch_norm64(x, w if affine else None,
                                                bias if affine else None, g)
        m = x.size // 3
        close(out.detach().numpy(), forward[0], dtype, m + 8, "F.batch_norm")
        close(ts[0].grad.numpy(), backward[0], dtype, 2 * m + 16, "grad x", terms)
        if affine:
            close(ts[1].grad.numpy(), backward[1], dtype, 2 * m + 16, "grad weight")
            close(ts[2].grad.numpy(), backward[2], dtype, 2 * m + 16, "grad bias")
        unbiased = forward[3] * m / (m - 1)
        close(rm.numpy(), 0.75 * 0.5 + 0.25 * forward[1], dtype, m + 8, "running_mean")
        close(rv.numpy(), 0.75 * 2.0 + 0.25 * unbiased, dtype, m + 8, "running_var")


def test_the_op_matches_its_composed_form_and_is_deterministic(backend):
    b = backend
    x, w, bias, g = _op_case(b, "float32", (8, 4, 7, 3))
    results = []
    for weight_dtype in ("float32", "float32", "float64"):  # float64 weights: composed
        ts = [ndlite.tensor(x, backend=b, requires_grad=True),
              ndlite.tensor(w.astype(weight_dtype), backend=b, requires_grad=True),
              ndlite.tensor(bias.astype(weight_dtype), backend=b, requires_grad=True)]
        if np.dtype(weight_dtype) not in b.dtypes:
            continue
        out = F.batch_norm(ts[0], None, None, ts[1], ts[2], training=True)
        (out * ndlite.tensor(g.astype(out.dtype), backend=b)).sum().backward()
        results.append([out.detach().numpy(), *(t.grad.numpy() for t in ts)])
    for one, two in zip(results[0], results[1], strict=True):
        same_bits(two, one, "F.batch_norm run to run")
    if len(results) == 3:
        for fused, composed in zip(results[0], results[2], strict=True):
            np.testing.assert_allclose(fused, composed.astype(np.float32), rtol=2e-4,
                                       atol=2e-4)


def test_the_op_first_and_second_derivatives(backend):
    b = backend
    if np.dtype("float64") not in b.dtypes:
        pytest.skip(f"{b.name} has no float64")
    r = np.random.default_rng(5)
    for shape in [(4, 3), (3, 2, 5), (2, 3, 2, 3)]:
        inputs = [r.standard_normal(shape), r.standard_normal(shape[1]),
                  r.standard_normal(shape[1])]

        def fn(t):
            return F.batch_norm(t[0], None, None, t[1], t[2], training=True) ** 2

        gradcheck(fn, inputs, [0, 1, 2], backend=b, name=f"batch_norm {shape}")
        gradgradcheck(fn, inputs, [0, 1, 2], backend=b, name=f"batch_norm {shape}")
    plain = [r.standard_normal((5, 2, 3))]
    gradcheck(lambda t: F.batch_norm(t[0], None, None, training=True) ** 3, plain, [0],
              backend=b, name="batch_norm without weight")
    gradgradcheck(lambda t: F.batch_norm(t[0], None, None, training=True) ** 3, plain, [0],
                  backend=b, name="batch_norm without weight")


def test_the_op_in_half_keeps_its_dtype_and_float32_statistics(backend):
    b = backend
    for half in [d for d in HALF if d in b.dtypes]:
        x, w, bias, g = _op_case(b, "float32")
        ts = [ndlite.tensor(a.astype(half), backend=b, requires_grad=True) for a in (x, w, bias)]
        rm = ndlite.zeros(3, dtype=half, backend=b)
        rv = ndlite.ones(3, dtype=half, backend=b)
        out = F.batch_norm(ts[0], rm, rv, ts[1], ts[2], training=True)
        assert out.dtype == half and rm.dtype == half and rv.dtype == half
        out.sum().backward()
        assert all(t.grad.dtype == half for t in ts)
        wide = batch_norm64(*(a.astype(half).astype(np.float32) for a in (x, w, bias, g)))
        close(out.detach().numpy().astype(np.float32), wide[0][0], half, 80, f"{half} F.batch_norm")
        close(rm.numpy().astype(np.float32), 0.1 * wide[0][1], half, 80, f"{half} mean")


# ---- PyTorch ----------------------------------------------------------------------------------


def test_the_op_matches_pytorch_to_second_order():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(12)
    arrays = [r.standard_normal((5, 3, 4, 2)) * 2 + 1, r.standard_normal(3),
              r.standard_normal(3)]
    results = []
    for lib, make in ((ndlite, lambda a: ndlite.tensor(a, requires_grad=True)),
                      (torch, lambda a: torch.tensor(a, requires_grad=True))):
        ts = [make(a) for a in arrays]
        rm, rv = lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)
        out = lib.nn.functional.batch_norm(ts[0], rm, rv, ts[1], ts[2], training=True,
                                           momentum=0.3, eps=1e-3)
        fused = lib.autograd.grad((out ** 3).sum(), ts, retain_graph=True)  # the fused backward
        first = lib.autograd.grad((out ** 3).sum(), ts, create_graph=True)  # composed
        second = lib.autograd.grad(sum((g ** 2).sum() for g in first), ts)
        results.append([t.detach().numpy() for t in (out, rm, rv, *fused, *first, *second)])
    for got, want in zip(*results, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


# ---- the CUDA kernels on the CPU ----------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("g++", "nm", "c++filt")
KERNELS = ("ndl_bn_chunk_stats", "ndl_bn_stats", "ndl_bn_normalize", "ndl_bn_chunk_grad",
           "ndl_bn_grad_sums", "ndl_bn_grad_input")
#: host drivers beside the kernels: a thread's walk over a chunk with blockDim.x = step
#: against the direct offsets (the count of mismatches), and the plane kernels run with real
#: (tx, ty) blocks over a grid of `blocks`, every thread in turn (they share nothing)
DRIVERS = """
extern "C" long long ndl_bn_walk_errors(int N, int C, int S, int step) {
  long long bad = 0;
  blockDim.x = step;
  for (int c = 0; c < C; ++c)
    for (int start = 0; start < N * S; start += 3)
      for (int t = 0; t < step; ++t) {
        threadIdx.x = t;
        ndl_bn_walk<int> w(start + t, c, C, S);
        for (int e = start + t; e < N * S; e += step, w.next())
          bad += w.at != (e / S * C + c) * S + e % S;
      }
  blockDim.x = 1;
  threadIdx.x = 0;
  return bad;
}
static void ndl_bn_grid(int tx, int ty, int blocks, void (*body)()) {
  blockDim = {unsigned(tx), unsigned(ty), 1};
  gridDim = {unsigned(blocks), 1, 1};
  for (int b = 0; b < blocks; ++b)
    for (int y = 0; y < ty; ++y)
      for (int x = 0; x < tx; ++x) {
        blockIdx.x = b;
        threadIdx = {unsigned(x), unsigned(y), 0};
        body();
      }
  blockDim = {1, 1, 1};
  gridDim = {1, 1, 1};
  blockIdx.x = 0;
  threadIdx = {0, 0, 0};
}
static const double *g_x, *g_mean, *g_invstd, *g_weight, *g_bias, *g_grad, *g_dy, *g_dyx;
static double* g_out;
static int g_planes, g_C, g_S, g_M;
extern "C" void ndl_bn_planes(const double* x, const double* grad, const double* mean,
                              const double* invstd, const double* weight, const double* bias,
                              const double* dy, const double* dyx, double* y, double* gx,
                              int planes, int C, int S, int tx, int ty, int blocks) {
  g_x = x; g_grad = grad; g_mean = mean; g_invstd = invstd; g_weight = weight; g_bias = bias;
  g_dy = dy; g_dyx = dyx; g_planes = planes; g_C = C; g_S = S; g_M = planes / C * S;
  g_out = y;
  ndl_bn_grid(tx, ty, blocks, [] { ndl_bn_normalize<double, int>(g_x, g_mean, g_invstd,
      g_weight, g_bias, g_out, g_planes, g_C, g_S); });
  g_out = gx;
  ndl_bn_grid(tx, ty, blocks, [] { ndl_bn_grad_input<double, int>(g_grad, g_x, g_mean,
      g_invstd, g_weight, g_dy, g_dyx, g_out, g_planes, g_C, g_S, g_M); });
}
"""


def _emulation():
    path = Path(__file__).with_name("test_cupy_kernels_on_cpu.py")
    spec = importlib.util.spec_from_file_location("cupy_kernels_on_cpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                    reason=f"needs {', '.join(TOOLS)} to build the kernels as host code")
def test_cuda_kernels_and_their_launches_on_the_cpu(tmp_path):
    source = _emulation().HOST + f'#include "{ROOT}/backends/ndlite_cupy/kernels/norm.cu"\n'
    for k in KERNELS:  # taking the addresses instantiates the templates
        source += (f"void* {k}_p[] = {{(void*)&{k}<float, int>, (void*)&{k}<float, long long>,"
                   f" (void*)&{k}<double, int>, (void*)&{k}<double, long long>}};\n")
    (tmp_path / "host.cpp").write_text(source + DRIVERS)
    library = tmp_path / "libnorm.so"
    subprocess.run(["g++", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-o", str(library),
                    str(tmp_path / "host.cpp")], check=True, capture_output=True, text=True)
    run = subprocess.run([sys.executable, __file__, str(library)], capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "batch norm kernels match" in run.stdout and "walks and blocks match" in run.stdout


#: the chunk kernels with real blocks: a std::thread per CUDA thread, __syncthreads a barrier,
#: __shared__ arrays static (one block runs at a time), threadIdx per thread
THREADED = """#include <barrier>
#include <cmath>
#include <thread>
#include <vector>
using std::sqrt;
struct ndl_dim3 { unsigned x, y, z; };
static ndl_dim3 blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static thread_local ndl_dim3 threadIdx = {0, 0, 0};
static std::barrier<>* ndl_block_barrier = nullptr;
#define __global__
#define __shared__ static
#define __host__
#define __device__
inline void __syncthreads() { ndl_block_barrier->arrive_and_wait(); }
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int) { return v; }
template <typename T> inline T __shfl_sync(unsigned, T v, int) { return v; }
#include "NORM_CU"
template <typename F>
static void ndl_grid(int threads, int blocks, F body) {
  blockDim = {unsigned(threads), 1, 1};
  gridDim = {unsigned(blocks), 1, 1};
  for (int b = 0; b < blocks; ++b) {
    blockIdx.x = b;
    std::barrier<> barrier(threads);
    ndl_block_barrier = &barrier;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&body, t] { threadIdx = {unsigned(t), 0, 0}; body(); });
    for (auto& thread : pool) thread.join();
  }
}
extern "C" void chunk_stats(const double* x, double* mean, double* m2, int N, int C, int S,
                            int per, int K, int threads, int blocks) {
  ndl_grid(threads, blocks, [=] { ndl_bn_chunk_stats<double, int>(x, mean, m2, N, C, S, per,
                                                                  K); });
}
extern "C" void chunk_grad(const double* grad, const double* x, const double* mean,
                           const double* invstd, double* dy, double* dyx, int N, int C, int S,
                           int per, int K, int threads, int blocks) {
  ndl_grid(threads, blocks, [=] { ndl_bn_chunk_grad<double, int>(grad, x, mean, invstd, dy,
                                                                 dyx, N, C, S, per, K); });
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the kernels")
def test_cuda_block_trees_with_threads_on_the_cpu(tmp_path):
    import ctypes

    source = THREADED.replace("NORM_CU", f"{ROOT}/backends/ndlite_cupy/kernels/norm.cu")
    (tmp_path / "threaded.cpp").write_text(source)
    library = tmp_path / "libthreaded.so"
    build = subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-pthread",
                            "-shared", "-fPIC", "-o", str(library),
                            str(tmp_path / "threaded.cpp")], capture_output=True, text=True)
    if build.returncode and "barrier" in build.stderr:
        pytest.skip("this g++ has no std::barrier (C++20)")
    assert build.returncode == 0, build.stderr[-3000:]
    lib = ctypes.CDLL(str(library))
    r = np.random.default_rng(6)
    for shape, per, threads, blocks in [((5, 3, 7), 9, 4, 2), ((40, 2), 13, 8, 5),
                                        ((3, 2, 100), 64, 256, 3), ((2, 1, 33), 66, 32, 1)]:
        n, c, s = shape[0], shape[1], int(np.prod(shape[2:], dtype=int))
        k = -(-n * s // per)
        x, g = r.standard_normal(shape) * 2 + 1, r.standard_normal(shape)
        channels = x.transpose(1, 0, *range(2, x.ndim)).reshape(c, -1)
        grads = g.transpose(1, 0, *range(2, x.ndim)).reshape(c, -1)
        mean, invstd = channels.mean(1), 1 / channels.std(1)
        want = np.zeros((4, c, k))
        for ci in range(c):
            for ki in range(k):
                part, gp = channels[ci, ki * per:(ki + 1) * per], grads[ci, ki * per:(ki + 1) * per]
                want[:, ci, ki] = (part.mean(), ((part - part.mean()) ** 2).sum(), gp.sum(),
                                   (gp * (part - mean[ci]) * invstd[ci]).sum())
        runs = []
        for _ in range(2):
            got = np.full((4, c * k), np.nan)
            ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in (x, g, mean, invstd, *got)]
            lib.chunk_stats(ptr[0], ptr[4], ptr[5], n, c, s, per, k, threads, blocks)
            lib.chunk_grad(ptr[1], ptr[0], ptr[2], ptr[3], ptr[6], ptr[7], n, c, s, per, k,
                           threads, blocks)
            runs.append(got)
            np.testing.assert_allclose(got.reshape(4, c, k), want, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{shape} per {per}, {threads} threads")
        same_bits(runs[1], runs[0], "block trees run to run")


def check_cuda_walks_and_blocks(library) -> None:
    """In the subprocess: the chunk walk with GPU-sized steps, and the plane kernels with
    (tx, ty) blocks as norm.py fits them, against the one-thread run."""
    import ctypes

    from ndlite_cupy import norm

    walk = library.ndl_bn_walk_errors
    walk.restype = ctypes.c_longlong
    for n, c, s, step in [(3, 2, 5, 4), (2, 3, 1, 8), (4, 2, 3, 7), (2, 2, 9, 32), (3, 1, 2, 2)]:
        assert walk(n, c, s, step) == 0, ("walk", n, c, s, step)
    for shape in [(3, 4, 5), (2, 3, 70), (9, 2), (2, 2, 3, 3), (2, 2, 600)]:
        x, w, bias, g = _case(shape, "float64", True, 2)
        y, mean, invstd, _ = norm.batch_norm(None, x, w, bias, EPS)
        gx, gw, gb = norm.batch_norm_grad(None, g, x, w, mean, invstd, True)
        planes, s = shape[0] * shape[1], int(np.prod(shape[2:], dtype=int))
        tx = min(norm.THREADS, 1 << max(s - 1, 0).bit_length())
        ty = norm.THREADS // tx
        for blocks in (1, 3):
            out_y, out_gx = np.full(x.shape, np.nan), np.full(x.shape, np.nan)
            pointers = [a.ctypes.data_as(ctypes.c_void_p) for a in
                        (x, g, mean, invstd, w, bias, gb, gw, out_y, out_gx)]
            library.ndl_bn_planes(*pointers, planes, shape[1], s, tx, ty, blocks)
            same_bits(out_y, y, f"normalize with ({tx}, {ty}) blocks {shape}")
            same_bits(out_gx, gx, f"grad_input with ({tx}, {ty}) blocks {shape}")


def check_cuda_kernels_on_the_cpu() -> None:
    """In the subprocess: ndlite_cupy/norm.py over the host-built kernels, against float64."""
    from ndlite_cupy import norm

    b = ndlite.get_backend("numpy")
    for chunk in (norm.CHUNK_MIN, 7):  # one chunk per channel, then many
        norm.CHUNK_MIN = chunk
        for shape in [(7, 3), (4, 3, 9), (2, 3, 5, 7), (40, 2, 3), (1, 2, 1)]:
            for dtype, affine in [("float32", True), ("float64", False), ("float64", True)]:
                x, w, bias, g = _case(shape, dtype, affine, chunk)
                forward, backward, terms = batch_norm64(x, w, bias, g)
                m = x.size // shape[1]
                out = norm.batch_norm(b, x, w, bias, EPS)
                for got, ref in zip(out, forward, strict=True):
                    close(got, ref, dtype, m + 8, f"cuda batch_norm {shape} {chunk}")
                grads = norm.batch_norm_grad(b, g, x, w, out[1], out[2], affine)
                for got, ref, what in zip(grads, backward, ("x", "w", "b"), strict=True):
                    if not affine and what != "x":
                        assert got is None
                        continue
                    close(got, ref, dtype, 2 * m + 16, f"cuda batch_norm_grad {what} {shape}",
                          terms if what == "x" else 0.0)
    print("batch norm kernels match")


if __name__ == "__main__":
    import ctypes

    _emulation().install_stand_ins(sys.argv[1])
    check_cuda_kernels_on_the_cpu()
    check_cuda_walks_and_blocks(ctypes.CDLL(sys.argv[1]))
    print("walks and blocks match")
