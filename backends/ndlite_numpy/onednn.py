"""oneDNN's convolutions for float32, through its C API with ctypes (an optional extra;
onednn_gemm.py adds its matrix products).

PyTorch's CPU convolutions are oneDNN's direct AVX-512/AVX2 kernels; on the 2-core VM they
run the VGG-style net's convolution passes 3.3x faster than our im2col/Winograd kernels
(kernels.py, winograd.py): the gap was the algorithm, not BLAS (docs/DESIGN.md, "oneDNN").
`pip install onednn-cpu-gomp` (in the `cpu` extra) puts libdnnl.so.3 in `<prefix>/lib`;
without it, with NDLITE_ONEDNN=0, in a forked child, for float64 (oneDNN has no double
convolutions) or for a geometry it declines, nn.py's paths run.

Each (op, shapes, stride, padding, dilation, groups, threads) gets one primitive, made once
and cached: the convolution with every layout left to oneDNN ("any": blocked, nChw16c on
AVX-512) and the reorders from and to our NCHW / OIHW arrays around it, the blocked copies in
scratch buffers (scratch.py). oneDNN's OpenMP pool (libgomp) is set to the backend's thread
count (threads.total()) before a primitive is made and before each run: OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS / threadpoolctl are the one knob, as for the other paths.
"""

from __future__ import annotations

import ctypes
import os
import site
import sys
import threading

import numpy as np

from . import scratch, threads

MODE = os.environ.get("NDLITE_ONEDNN", "auto")
_F32, _ANY, _ABCD, _ABCDE = 3, 1, 5, 6  # dnnl_data_type_t, dnnl_format_tag_t
_FORWARD_TRAINING, _CONV_DIRECT = 64, 1  # dnnl_prop_kind_t, dnnl_alg_kind_t
# dnnl_query_t: the memory descriptors a primitive descriptor chose
_Q = {"src": 129, "diff_src": 130, "weights": 131, "diff_weights": 132, "dst": 133,
      "diff_dst": 134}
# DNNL_ARG_*
_ARG = {"src": 1, "dst": 17, "weights": 33, "diff_src": 129, "diff_dst": 145,
        "diff_weights": 161, "from": 1, "to": 17}
_ISA = {0x1: "SSE4.1", 0x3: "AVX", 0x7: "AVX2", 0xF: "AVX2_VNNI", 0x1F: "AVX2_VNNI_2",
        0x27: "AVX-512", 0x67: "AVX-512_VNNI", 0xE7: "AVX-512_BF16", 0x1EF: "AVX-512_FP16",
        0xFEF: "AMX", 0x1FEF: "AMX_FP16"}
_Dims = ctypes.c_int64 * 12  # dnnl_dims_t


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


def _load():
    """(libdnnl, libgomp, None) or (None, None, why not)."""
    if MODE == "0":
        return None, None, "NDLITE_ONEDNN=0"
    names = [os.path.join(p, "lib", "libdnnl.so.3") for p in dict.fromkeys(  # pip's places
        (sys.prefix, sys.base_prefix, site.getuserbase()))] + ["libdnnl.so.3"]
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        return None, None, ("libdnnl.so.3 not found (pip install 'ndlite[cpu]' or "
                            f"onednn-cpu-gomp): {errors[-1]}")
    try:  # the OpenMP runtime libdnnl was linked with (onednn-cpu-gomp: GNU's)
        gomp = ctypes.CDLL("libgomp.so.1")
    except OSError as e:
        return None, None, f"libgomp.so.1 not loadable: {e}"
    for name, (restype, *argtypes) in _SIGNATURES.items():  # (pointers must not be cut to int)
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    gomp.omp_set_num_threads.argtypes = [ctypes.c_int]
    gomp.omp_get_max_threads.restype = ctypes.c_int
    return lib, gomp, None


_vp, _i, _dims_p, _pp = (ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                         ctypes.POINTER(ctypes.c_void_p))
_SIGNATURES = {  # name: (restype, *argtypes), from oneapi/dnnl/dnnl.h (v3.2)
    "dnnl_engine_create": (_i, _pp, _i, ctypes.c_size_t),
    "dnnl_stream_create": (_i, _pp, _vp, ctypes.c_uint),
    "dnnl_memory_desc_create_with_tag": (_i, _pp, _i, _dims_p, _i, _i),
    "dnnl_memory_desc_destroy": (_i, _vp),
    "dnnl_memory_desc_equal": (_i, _vp, _vp),
    "dnnl_memory_desc_get_size": (ctypes.c_size_t, _vp),
    "dnnl_memory_create": (_i, _pp, _vp, _vp, _vp),
    "dnnl_memory_set_data_handle": (_i, _vp, _vp),
    "dnnl_primitive_desc_query_md": (_vp, _vp, _i, _i),
    "dnnl_primitive_desc_destroy": (_i, _vp),
    "dnnl_primitive_create": (_i, _pp, _vp),
    "dnnl_primitive_destroy": (_i, _vp),
    "dnnl_memory_destroy": (_i, _vp),
    "dnnl_primitive_execute": (_i, _vp, _vp, _i, _vp),
    "dnnl_reorder_primitive_desc_create": (_i, _pp, _vp, _vp, _vp, _vp, _vp),
    "dnnl_convolution_forward_primitive_desc_create": (
        _i, _pp, _vp, _i, _i, _vp, _vp, _vp, _vp, _dims_p, _dims_p, _dims_p, _dims_p, _vp),
    "dnnl_convolution_backward_data_primitive_desc_create": (
        _i, _pp, _vp, _i, _vp, _vp, _vp, _dims_p, _dims_p, _dims_p, _dims_p, _vp, _vp),
    "dnnl_convolution_backward_weights_primitive_desc_create": (
        _i, _pp, _vp, _i, _vp, _vp, _vp, _vp, _dims_p, _dims_p, _dims_p, _dims_p, _vp, _vp),
    "dnnl_version": (ctypes.POINTER(_Version),),
    "dnnl_get_effective_cpu_isa": (_i,),
}


_lib, _gomp, _why = _load()
_engine = ctypes.c_void_p()
_local = threading.local()  # one stream per calling thread
_cache: dict = {}
_cache_lock = threading.Lock()


class DnnlError(RuntimeError):
    """A oneDNN call failed (its dnnl_status_t in the message)."""


def _ok(status: int, what: str):
    if status != 0:
        raise DnnlError(f"oneDNN {what} failed with status {status}")


if _lib is not None:
    try:
        _ok(_lib.dnnl_engine_create(ctypes.byref(_engine), 1, 0), "dnnl_engine_create")
    except DnnlError as e:
        _lib, _why = None, str(e)


def _after_fork():
    """A forked child gets libgomp's thread pool in a state it cannot use (the parent's
    threads are gone; its next parallel region hangs): nn.py's paths run there."""
    global _lib, _why
    if _lib is not None:
        _lib, _why = None, "a forked child: libgomp's threads do not survive fork()"


os.register_at_fork(after_in_child=_after_fork)


def available() -> bool: return _lib is not None  # noqa: E704


def status() -> str:
    """For `ndlite info`: oneDNN's version, ISA and threads, or why it is off."""
    if _lib is None:
        return f"off ({_why})"
    v = _lib.dnnl_version().contents
    isa = _lib.dnnl_get_effective_cpu_isa()
    return (f"oneDNN {v.major}.{v.minor}.{v.patch} ({_ISA.get(isa, hex(isa))}, OpenMP "
            f"{threads.total()} threads): float32 conv2d and its gradients, float32 matrix "
            "products; NDLITE_ONEDNN=0 turns it off")


def _stream():
    s = getattr(_local, "stream", None)
    if s is None:
        s = ctypes.c_void_p()
        _ok(_lib.dnnl_stream_create(ctypes.byref(s), _engine, 1), "dnnl_stream_create")
        _local.stream = s
    return s


def _md(shape, tag: int) -> ctypes.c_void_p:
    md = ctypes.c_void_p()
    _ok(_lib.dnnl_memory_desc_create_with_tag(ctypes.byref(md), len(shape), _Dims(*shape), _F32,
                                              tag), "dnnl_memory_desc_create_with_tag")
    return md


def _memory(md) -> ctypes.c_void_p:
    mem = ctypes.c_void_p()
    _ok(_lib.dnnl_memory_create(ctypes.byref(mem), md, _engine, None), "dnnl_memory_create")
    return mem


def _primitive(pd) -> ctypes.c_void_p:
    prim = ctypes.c_void_p()
    _ok(_lib.dnnl_primitive_create(ctypes.byref(prim), pd), "dnnl_primitive_create")
    return prim


def _execute(prim, args: dict):
    pairs = (_ExecArg * len(args))(*((_ARG[k], m) for k, m in args.items()))
    _ok(_lib.dnnl_primitive_execute(prim, _stream(), len(args), pairs), "dnnl_primitive_execute")


class _Operand:
    """One of a convolution's operands: our plain array (NCHW or OIHW) and, where oneDNN chose
    another layout, a scratch buffer (scratch.py: reused, bounded) in that layout and the
    reorder between the two."""

    def __init__(self, pd, name: str, shape, plain_md, into: bool):
        chosen = _lib.dnnl_primitive_desc_query_md(pd, _Q[name], 0)
        self.name, self.shape, self.plain = name, tuple(shape), _memory(plain_md)
        self.reorder = None
        if _lib.dnnl_memory_desc_equal(chosen, plain_md):
            self.mem = self.plain
            return
        self.mem = _memory(chosen)
        self.size = _lib.dnnl_memory_desc_get_size(chosen) // 4 + 16  # (room to align)
        rpd = ctypes.c_void_p()
        src, dst = (plain_md, chosen) if into else (chosen, plain_md)
        _ok(_lib.dnnl_reorder_primitive_desc_create(ctypes.byref(rpd), src, _engine, dst,
                                                    _engine, None), "reorder primitive desc")
        try:
            self.reorder = _primitive(rpd)
        finally:
            _lib.dnnl_primitive_desc_destroy(rpd)
        self.args = {"from": self.plain, "to": self.mem} if into else \
            {"from": self.mem, "to": self.plain}

    def bind(self, array):
        _ok(_lib.dnnl_memory_set_data_handle(self.plain, ctypes.c_void_p(array.ctypes.data)),
            "dnnl_memory_set_data_handle")
        if self.reorder is not None:  # 64-byte aligned; held through the run (oneDNN has only
            # the address, and scratch keeps no large buffer: a freed one crashed CI)
            self.held = buf = scratch.buffer(("onednn", self.name), (self.size,), np.float32)
            _ok(_lib.dnnl_memory_set_data_handle(self.mem, ctypes.c_void_p(
                buf.ctypes.data + (-buf.ctypes.data % 64))), "dnnl_memory_set_data_handle")


    def convert(self):
        if self.reorder is not None:
            _execute(self.reorder, self.args)

    def __del__(self):  # (a primitive dropped from the cache)
        if _lib is not None and getattr(self, "plain", None) is not None:
            if self.reorder is not None:
                _lib.dnnl_primitive_destroy(self.reorder)
                _lib.dnnl_memory_destroy(self.mem)
            _lib.dnnl_memory_destroy(self.plain)


_NAMES = {"forward": ("src", "weights", "dst"),
          "backward_data": ("diff_dst", "weights", "diff_src"),
          "backward_weights": ("src", "diff_dst", "diff_weights")}


def _conv_desc(kind: str, any_: dict, geometry: tuple, fwd) -> ctypes.c_void_p:
    """The primitive descriptor of one pass (fwd: the forward's, the others' hint)."""
    pd = ctypes.c_void_p()
    if kind == "forward":
        _ok(_lib.dnnl_convolution_forward_primitive_desc_create(
            ctypes.byref(pd), _engine, _FORWARD_TRAINING, _CONV_DIRECT, any_["src"],
            any_["weights"], None, any_["dst"], *geometry, None), "convolution forward")
    elif kind == "backward_data":
        _ok(_lib.dnnl_convolution_backward_data_primitive_desc_create(
            ctypes.byref(pd), _engine, _CONV_DIRECT, any_["src"], any_["weights"],
            any_["dst"], *geometry, fwd, None), "convolution backward data")
    else:
        _ok(_lib.dnnl_convolution_backward_weights_primitive_desc_create(
            ctypes.byref(pd), _engine, _CONV_DIRECT, any_["src"], any_["weights"], None,
            any_["dst"], *geometry, fwd, None), "convolution backward weights")
    return pd


class _Conv:
    """One convolution pass (forward, backward_data or backward_weights) for one geometry."""

    def __init__(self, kind: str, x_shape, w_shape, stride, padding, dilation, groups):
        (n, _, h, w), (o, cg, kh, kw) = x_shape, w_shape
        oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        shapes = {"src": x_shape, "dst": (n, o, oh, ow), "weights": w_shape}
        wdims = (groups, o // groups, cg, kh, kw) if groups > 1 else w_shape
        plain = {"src": _md(x_shape, _ABCD), "dst": _md(shapes["dst"], _ABCD),
                 "weights": _md(wdims, _ABCDE if groups > 1 else _ABCD)}
        any_ = {"src": _md(x_shape, _ANY), "dst": _md(shapes["dst"], _ANY),
                "weights": _md(wdims, _ANY)}
        # oneDNN's dilation counts the gaps (ours minus one); the right padding is the left:
        # its output size is floor((h - span + left + right) / stride) + 1, as ours
        geometry = (_Dims(*stride), _Dims(*(d - 1 for d in dilation)), _Dims(*padding),
                    _Dims(*padding))
        self.primitive, descs = None, []
        try:
            descs.append(_conv_desc("forward", any_, geometry, None))
            if kind != "forward":
                descs.append(_conv_desc(kind, any_, geometry, descs[0]))
            self.operands = [_Operand(descs[-1], name, shapes[name.removeprefix("diff_")],
                                      plain[name.removeprefix("diff_")], into=i < 2)
                             for i, name in enumerate(_NAMES[kind])]
            self.primitive = _primitive(descs[-1])
        finally:  # (a primitive and a memory object keep their own copies of these)
            for md in (*plain.values(), *any_.values()):
                _lib.dnnl_memory_desc_destroy(md)
            for pd in descs:
                _lib.dnnl_primitive_desc_destroy(pd)

    def __del__(self):
        if _lib is not None and getattr(self, "primitive", None) is not None:
            _lib.dnnl_primitive_destroy(self.primitive)

    def __call__(self, a, b):
        """The pass on the plain arrays a, b (its two inputs); a new plain result."""
        out = np.empty(self.operands[2].shape, np.float32)
        for operand, array in zip(self.operands, (a, b, out), strict=True):
            operand.bind(array)
        for operand in self.operands[:2]:
            operand.convert()
        _execute(self.primitive, {op.name: op.mem for op in self.operands})
        self.operands[2].convert()
        self.operands[0].held = self.operands[1].held = self.operands[2].held = None
        return out


_run_lock = threading.Lock()  # see _locked
MAX_CACHED = 64


def _plan(kind, x_shape, w_shape, stride, padding, dilation, groups, n_threads):
    """The cached _Conv for this pass, geometry and thread count, or None if declined."""
    key = (kind, tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding), tuple(dilation),
           groups, n_threads)
    return _cached(key, lambda: _Conv(kind, x_shape, w_shape, stride, padding, dilation, groups),
                   n_threads)


def _cached(key, make, n_threads):
    """The primitive of `key`, made by make() on first use (None if oneDNN declines it)."""
    with _cache_lock:
        if key in _cache:
            _cache[key] = plan = _cache.pop(key)  # most recently used last
            return plan
    try:  # a primitive is made for the thread count it will run at
        plan = _locked(n_threads, make)
    except DnnlError:
        plan = None
    with _cache_lock:
        _cache[key] = plan
        while len(_cache) > MAX_CACHED:
            _cache.pop(next(iter(_cache)))
    return plan


def _locked(n_threads: int, fn):
    """fn() with oneDNN's OpenMP threads at n_threads, one call at a time (a primitive's
    buffers and oneDNN's scratchpad are shared). libgomp's count is per calling thread and
    shared with other users in the process (PyTorch's): set for the call, then given back."""
    with _run_lock:
        before = _gomp.omp_get_max_threads()
        _gomp.omp_set_num_threads(n_threads)
        try:
            return fn()
        finally:
            _gomp.omp_set_num_threads(before)


_off = 0  # > 0 inside `disabled()`


class disabled:
    """Context manager: nn.py's own paths inside (tests and benchmarks compare against them)."""

    def __enter__(self):
        global _off
        _off += 1

    def __exit__(self, *exc):
        global _off
        _off -= 1


def _takes(*arrays) -> bool:
    return _lib is not None and not _off and all(a.dtype == np.float32 and a.size
                                                 for a in arrays)


def _run(kind, shapes, a, b, geometry):
    """Pass `kind` on a, b (one thread count read), or None: declined or failed (nn.py's)."""
    n = threads.total()
    plan = _plan(kind, *shapes, *geometry, n)
    try:
        return None if plan is None else _locked(
            n, lambda: plan(np.ascontiguousarray(a), np.ascontiguousarray(b)))
    except DnnlError:
        return None


def conv2d(x, weight, stride, padding, dilation, groups):
    """The forward convolution of float32 x (N, C, H, W) and weight (O, C/G, kh, kw), or None
    where oneDNN does not take it."""
    return _run("forward", (x.shape, weight.shape), x, weight,
                (stride, padding, dilation, groups)) if _takes(x, weight) else None


def conv2d_grad_input(grad_output, weight, input_shape, stride, padding, dilation, groups):
    return _run("backward_data", (input_shape, weight.shape), grad_output, weight,
                (stride, padding, dilation, groups)) if _takes(grad_output, weight) else None


def conv2d_grad_weight(x, grad_output, weight_shape, stride, padding, dilation, groups):
    return _run("backward_weights", (x.shape, weight_shape), x, grad_output,
                (stride, padding, dilation, groups)) if _takes(x, grad_output) else None
