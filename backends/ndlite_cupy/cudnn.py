"""Convolution on the CuPy backend through NVIDIA's cuDNN, by the graph API of its Python
frontend (pip `nvidia-cudnn-frontend`, imported as `cudnn`). ndlite's own im2col + cuBLAS
kernels (nn.py) stay the fallback and the reference.

Why: im2col writes kh*kw copies of the input and runs one GEMM over them; cuDNN's
implicit-GEMM engines read the input once, and run float16/bfloat16 natively (float32
accumulation) instead of on float32 copies. What ndlite keeps promising, and how:
- float32 in full precision, halves accumulated in float32, bitwise equal run to run: the
  engines are filtered as PyTorch filters them with TF32 off, and a little more (the
  numerical notes in `excluded_notes`: no TF32 tensor cores for float32, no down-converted
  inputs, no reduced-precision reductions, no FFT or Winograd, nothing nondeterministic).
  TF32 only with `ndlite.backends.cudnn.allow_tf32 = True`;
- every tensor's dims AND strides are set, outputs included: an output whose strides are
  left to cuDNN comes back channels-last even between NCHW inputs, and read as NCHW it is
  garbage (bench/results/cudnn_probe_h100.json);
- one graph per (kind, dtype, shapes, geometry), planned once and reused. A key that cuDNN
  declines (no engine left after the filter, check_support refuses) is remembered with its
  reason and runs on ndlite's kernels, as float64 always does (cuDNN's double convolutions
  are slow) and empty tensors do;
- the handle runs on CuPy's current stream, and each call takes its workspace from CuPy's
  pool, so a CUDA-graph capture (graph.py) takes it from its private pool like any other
  buffer. A capture never plans: a key first seen while recording runs on ndlite's kernels
  (the warm-up steps plan every key before the recording).

NDLITE_CUDNN=0 switches it off (read when a backend starts); it is on whenever the frontend
imports and finds libcudnn. Imports no CuPy and no cuDNN at module level: the backend passes
CuPy in, and the frontend is imported at the first `frontend()` call.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from ndlite.device import flags
from ndlite.dtypes import HALF

ENV = "NDLITE_CUDNN"
INSTALL = "pip install 'ndlite[cuda12]' or 'ndlite[cuda13]' (they bring the cuDNN frontend)"
#: the backend methods that take halves themselves while cuDNN is on (half.install's `native`)
CONVOLUTIONS = ("conv2d", "conv2d_grad_input", "conv2d_grad_weight")
#: which tensor of (x, weight, y) each kind reads first and second, and which it writes
ROLES = {"fprop": (0, 1, 2), "dgrad": (2, 1, 0), "wgrad": (0, 2, 1)}


@functools.cache
def frontend() -> tuple:
    """(the `cudnn` module, "") when the frontend imports and finds libcudnn, else (None,
    why). Imported once per process."""
    try:
        import cudnn
    except ModuleNotFoundError as exc:
        if exc.name != "cudnn":
            return None, f"the cuDNN frontend is installed but broken: {exc}"
        return None, f"the cuDNN frontend (nvidia-cudnn-frontend) is not installed: {INSTALL}"
    except Exception as exc:  # noqa: BLE001 - a broken install is reported, never raised
        return None, f"the cuDNN frontend failed to import ({type(exc).__name__}: {exc})"
    try:
        cudnn.backend_version()  # raises when no libcudnn was found to load
    except Exception as exc:  # noqa: BLE001
        return None, (f"the cuDNN library did not load ({type(exc).__name__}: {exc}): "
                      "pip install nvidia-cudnn-cu12 or nvidia-cudnn-cu13")
    return cudnn, ""


def switched_off() -> bool:
    """Whether NDLITE_CUDNN asks for ndlite's own kernels (0, false, off, no)."""
    return os.environ.get(ENV, "1").strip().lower() in ("0", "false", "off", "no")


def versions(cudnn) -> str:
    """"frontend 1.32.0, cuDNN 9.19.0" (cuDNN 9 numbers its versions major*10000 + minor*100
    + patch)."""
    v = cudnn.backend_version()
    frontend_version = getattr(cudnn, "__version__", "?")
    return f"frontend {frontend_version}, cuDNN {v // 10000}.{v % 10000 // 100}.{v % 100}"


def start(cupy, device, verify=None):
    """The Convolutions of a backend on `device`, or None when cuDNN is off or missing;
    `verify` checks each new float32 plan's first result (Convolutions)."""
    if switched_off():
        return None
    cudnn, _ = frontend()
    return None if cudnn is None else Convolutions(cudnn, cupy, device, verify)


def describe(convolutions) -> str:
    """The line `ndlite info` shows: on or off, why, and the versions."""
    cudnn, why = frontend()
    if convolutions is not None:
        return (f"on ({versions(cudnn)}): conv2d and its gradients in float32 (TF32 "
                f"{'on' if flags.TF32['conv'] else 'off'}), float16, bfloat16; "
                f"{len(convolutions.plans)} graphs planned, {len(convolutions.declined)} "
                "declined (on ndlite's kernels); float64 on ndlite's kernels")
    if cudnn is None:
        return f"off: {why}; convolution on ndlite's im2col + cuBLAS kernels"
    return f"off ({ENV}=0; {versions(cudnn)} installed); convolution on ndlite's kernels"


def nchw_strides(dims) -> list:
    """The element strides of a contiguous NCHW (or KCRS) tensor of `dims`."""
    n, c, h, w = dims
    return [c * h * w, h * w, w, 1]


#: the most plans of one key whose first float32 result `verify` judges before the key is
#: left to ndlite's kernels
TRIES = 6


def out_size(size, k, s, p, d) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def build_first_allowed(g, start: int = 0) -> int:
    """Build the first plan of g's ranked list that the note filter allows and that builds.

    Walked here, one pinned plan at a time, rather than by g.build_plans() alone: the
    frontend leaves the filter of the backend's plans to the backend, which refuses a
    deselected plan with an error that need not be the type the frontend's own walk steps
    over, so one deselected TF32 plan at the top of the list could end the whole walk."""
    failures = []
    for index in range(start, g.get_execution_plan_count()):
        try:
            g.select_plan(index)
            g.build_plans()
            return index
        except Exception as exc:  # noqa: BLE001 - deselected or unbuildable: the next one
            failures.append(f"[{index}] {type(exc).__name__}: {exc}")
    raise RuntimeError("no engine left after the numerical-note filter: "
                       + ("; ".join(failures[:4]) or "the plan list is empty"))


def plan_with_heuristics(cudnn, g) -> None:
    """Rank g's engines by cuDNN's heuristics mode B, then its fallback list; mode A where B
    refuses the graph. B is the slower query (once per graph) and the better ranking: on the
    H100 the ResNet-18-CIFAR step's convolutions took 18.6 ms of GPU time a step under B's
    first allowed plans, 19.6 ms under A's (torch.profiler over 3 steps, TF32 off; PyTorch's
    own 17.6 ms). Both rankings depend on the shapes and the GPU alone, never on timing."""
    try:
        g.create_execution_plans([cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
    except Exception:  # noqa: BLE001 - B cannot rank this graph: A's ranking
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])


class Plan:
    """One planned graph: its uids in the order (first input, second input, output), its
    workspace bytes, whether the ordered execute form works here (None: not tried), the index
    of the built plan in the graph's ranked list, and the frontend's C++ execute of that plan
    (`native`: None until looked up, False where this frontend has none)."""

    __slots__ = ("graph", "uids", "workspace", "ordered", "index", "native")

    def __init__(self, graph, uids: tuple, workspace: int, index: int = 0):
        self.graph, self.uids, self.workspace, self.ordered = graph, uids, workspace, None
        self.index, self.native = index, None


def native_execute(graph, index: int, handle):
    """(the lowered graph's C++ execute, the plan's C++ index, the cudnnHandle_t) of the built
    backend plan `index` of `graph`, or False where this frontend does not expose them.

    The frontend's public execute re-describes every buffer in Python on each call (its
    `_observe_unread` and `_describe`): ~70 us a call on the H100 host, more than most of
    ResNet-18's convolutions take on the GPU. Its own fast path ends in this one C++ call,
    with the uid -> pointer map and the plan's C++ index; ndlite makes that call itself. These
    are the frontend's private names (1.32): any that is missing, or a plan the frontend runs
    in Python (its python engines), leaves the public execute in charge."""
    try:
        if graph._engine_for(graph._plans[index]) is not None:
            return False  # a python engine: only the public execute runs it
        cpp = graph._materialize_backend_plan(index).cpp_index
        run = graph._lowered_graph._execute_plan_at_index
        backend_handle = handle.backend_handle
    except Exception:  # noqa: BLE001 - another frontend version: the public execute
        return False
    if cpp is None or not isinstance(backend_handle, int):
        return False
    return run, int(cpp), backend_handle


class Convolutions:
    """conv2d and its two gradients through cuDNN on one device. Each method returns the
    result, or None when cuDNN does not take the call (the caller runs ndlite's kernels).

    `verify(kind, a, b, out, shapes, geometry)` judges the first result of every new float32
    plan (TF32 off) against ndlite's kernels and returns why it is wrong, or "": the note
    filter alone let through an engine with TF32's errors (an H100's weight gradient of a 5x5
    layer at batch 4), so each plan proves itself once before it is kept."""

    def __init__(self, cudnn, cupy, device, verify=None):
        self.cudnn, self.cupy, self.device, self.verify = cudnn, cupy, device, verify
        self.handle = None  # created at the first call, on `device`
        self.plans: dict = {}  # key -> Plan
        self.declined: dict = {}  # key -> why cuDNN did not plan it
        self.unordered = ""  # why execute's ordered form failed here, if it did
        dt = cudnn.data_type
        self.types = {np.dtype(np.float32): dt.FLOAT, HALF[0]: dt.HALF}
        if len(HALF) > 1:
            self.types[HALF[-1]] = dt.BFLOAT16

    # ---- the three convolutions ----------------------------------------------------------------

    def fprop(self, x, weight, stride, padding, dilation, groups, capturing=False):
        """y = conv2d(x, weight) (N, O, OH, OW), or None."""
        if x.dtype not in self.types or x.size == 0 or weight.size == 0:
            return None
        (n, _, h, w), (o, _, kh, kw) = x.shape, weight.shape
        y_shape = (n, o, out_size(h, kh, stride[0], padding[0], dilation[0]),
                   out_size(w, kw, stride[1], padding[1], dilation[1]))
        return self._run("fprop", x, weight, (x.shape, weight.shape, y_shape),
                         (stride, padding, dilation, groups), capturing)

    def dgrad(self, grad_output, weight, input_shape, stride, padding, dilation, groups,
              capturing=False):
        """The gradient with respect to x, of `input_shape`, or None."""
        if (grad_output.dtype not in self.types or grad_output.size == 0 or weight.size == 0
                or 0 in input_shape):
            return None
        return self._run("dgrad", grad_output, weight,
                         (tuple(input_shape), weight.shape, grad_output.shape),
                         (stride, padding, dilation, groups), capturing)

    def wgrad(self, x, grad_output, weight_shape, stride, padding, dilation, groups,
              capturing=False):
        """The gradient with respect to the weight, of `weight_shape`, or None."""
        if (x.dtype not in self.types or x.size == 0 or grad_output.size == 0
                or 0 in weight_shape):
            return None
        return self._run("wgrad", x, grad_output, (x.shape, tuple(weight_shape),
                                                   grad_output.shape),
                         (stride, padding, dilation, groups), capturing)

    # ---- planning and running --------------------------------------------------------------------

    def _run(self, kind, a, b, shapes, geometry, capturing):
        """Run `kind` on inputs a and b of `shapes` (x, weight, y dims); None if declined."""
        stride, padding, dilation, groups = geometry
        key = (kind, a.dtype, *shapes, tuple(stride), tuple(padding), tuple(dilation),
               int(groups), flags.TF32["conv"])
        plan = fresh = self.plans.get(key)
        if plan is None:
            if capturing or key in self.declined:
                return None
            plan = self._plan(key)
            if plan is None:
                return None
        cupy = self.cupy
        out = cupy.empty(shapes[ROLES[kind][2]], dtype=a.dtype)
        a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
        self._execute(plan, a, b, out)
        if fresh is None and self.verify is not None and a.dtype == np.float32 and not key[-1]:
            return self._proven(key, plan, (kind, a, b, out, shapes, geometry))
        return out

    def _proven(self, key, plan, call):
        """The output of `call` (kind, a, b, out, shapes, geometry) once a plan's result passes
        `verify`: the plan's own, else the next allowed plans' of the ranked list, each run on
        the same inputs, at most TRIES in all; None, the key declined, when none passes."""
        why, tries = self.verify(*call), 1
        while why and tries < TRIES:
            try:
                with self.device:
                    plan.index = build_first_allowed(plan.graph, plan.index + 1)
                    plan.native = None  # another plan: its own C++ index
                    plan.workspace = int(plan.graph.get_workspace_size())
            except Exception:  # noqa: BLE001 - no plan left in the list
                break
            self._execute(plan, call[1], call[2], call[3])
            why, tries = self.verify(*call), tries + 1
        if why:
            del self.plans[key]
            self.declined[key] = f"{why}; {tries} plan(s) tried"
            return None
        return call[3]

    def _plan(self, key):
        """Plan `key` once: its Plan, or None with the reason kept in `declined`."""
        try:
            with self.device:
                plan = self.plans[key] = self._build(key)
        except Exception as exc:  # noqa: BLE001 - any refusal means: ndlite's kernels
            self.declined[key] = f"{type(exc).__name__}: {exc}"
            return None
        return plan

    def _handle(self):
        if self.handle is None:
            with self.device:
                self.handle = self.cudnn.create_handle()
        return self.handle

    def excluded_notes(self, dtype, tf32: bool) -> list:
        """The numerical notes of the engines ndlite does not run. PyTorch's filter with TF32
        off: tensor cores for float32 (TF32), unless allowed; down-converted inputs;
        nondeterministic engines. Stricter than PyTorch: reduced-precision reductions (halves
        accumulate in float32), and FFT and Winograd, whose error is not bounded by each
        element's own sum of |x||w| as the tolerance policy asks of a contraction (FFT's
        follows the whole input's norm, Winograd's transforms amplify it)."""
        note = self.cudnn.numerical_note
        excluded = [note.DOWN_CONVERT_INPUTS, note.REDUCED_PRECISION_REDUCTION,
                    note.NONDETERMINISTIC, note.FFT, note.WINOGRAD]
        # the Winograd engines of one tile size carry only their tile's note (a 5x5 forward
        # took one and missed the scaled bound); absent from older frontends
        excluded += [getattr(note, f"WINOGRAD_TILE_{t}") for t in ("4x4", "6x6", "13x13")
                     if hasattr(note, f"WINOGRAD_TILE_{t}")]
        if dtype == np.float32 and not tf32:
            excluded.append(note.TENSOR_CORE)
        return excluded

    def _build(self, key) -> Plan:
        """Build, filter and plan the graph of `key`; raises when cuDNN cannot run it."""
        kind, dtype, x_dims, w_dims, y_dims, stride, padding, dilation, _, tf32 = key
        cudnn = self.cudnn
        f32, io = cudnn.data_type.FLOAT, self.types[dtype]
        dims = (list(x_dims), list(w_dims), list(y_dims))
        first, second, written = ROLES[kind]
        g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32,
                          handle=self._handle())
        # every input's strides spelled out: NCHW, as ndlite stores it
        a = g.tensor(name="a", dim=dims[first], stride=nchw_strides(dims[first]), data_type=io)
        b = g.tensor(name="b", dim=dims[second], stride=nchw_strides(dims[second]),
                     data_type=io)
        geometry = dict(padding=list(padding), stride=list(stride), dilation=list(dilation),
                        compute_data_type=f32)  # cross-correlation: the default mode
        if kind == "fprop":
            out = g.conv_fprop(image=a, weight=b, **geometry)
        elif kind == "dgrad":
            out = g.conv_dgrad(loss=a, filter=b, **geometry)
        else:
            out = g.conv_wgrad(image=a, loss=b, **geometry)
        # THE TRAP: the output's strides too, or cuDNN picks channels-last
        out.set_output(True).set_data_type(io)
        out.set_dim(dims[written]).set_stride(nchw_strides(dims[written]))
        g.validate()
        g.build_operation_graph()
        plan_with_heuristics(cudnn, g)
        g.deselect_numeric_notes(self.excluded_notes(dtype, tf32))
        g.check_support()
        index = build_first_allowed(g)
        return Plan(g, (a.get_uid(), b.get_uid(), out.get_uid()), int(g.get_workspace_size()),
                    index)

    def _execute(self, plan: Plan, a, b, out) -> None:
        """Run `plan` on CuPy's current stream, its workspace from CuPy's pool."""
        cudnn, cupy = self.cudnn, self.cupy
        handle = self.handle
        cudnn.set_stream(handle, cupy.cuda.get_current_stream().ptr)  # cached: cheap if same
        workspace = cupy.empty(plan.workspace, dtype=np.uint8) if plan.workspace else None
        ws = workspace.data.ptr if workspace is not None else 0
        pointers = (a.data.ptr, b.data.ptr, out.data.ptr)
        if plan.native is None:
            plan.native = native_execute(plan.graph, plan.index, handle)
        if plan.native:
            run, cpp, backend_handle = plan.native
            try:
                run(dict(zip(plan.uids, pointers)), ws, cpp, backend_handle, None, None, None)
                return
            except (TypeError, RuntimeError) as exc:  # refused before launching: the public
                plan.native = False  # execute from now on, the reason kept for a reader
                self.unordered = f"C++ execute: {type(exc).__name__}: {exc}"
        if plan.ordered:
            plan.graph.execute(pointers, ws, handle=handle, tensor_uids=plan.uids)
            return
        if plan.ordered is None:  # the ordered form skips the dict's per-call work: try it
            try:
                plan.graph.execute(pointers, ws, handle=handle, tensor_uids=plan.uids)
                plan.ordered = True
                return
            except Exception as exc:  # noqa: BLE001 - it refuses before launching: the mapping
                plan.ordered = False  # form below, and the reason kept for a reader
                self.unordered = f"{type(exc).__name__}: {exc}"
        plan.graph.execute(dict(zip(plan.uids, pointers)), ws, handle=handle)
