"""backends/ndlite_cupy/cudnn.py run on the CPU against stand-ins for CuPy and for the cuDNN
frontend, so CI (no GPU, no cuDNN) checks its own logic: which tensors each of fprop, dgrad
and wgrad hands to cuDNN and with which dims, that every stride is set (the stand-in, like
cuDNN, writes an output whose strides were left to it channels-last), the engine filter (no
TF32, FFT, Winograd or nondeterministic engine for float32; tensor cores kept for halves and
with allow_tf32), the walk past deselected plans, graphs planned once per key, declined keys
remembered, no planning while a CUDA graph records, the stream and the workspace of each call,
and execute's mapping form when the ordered one is refused. The stand-in computes with the
NumPy backend in float64 and rounds once, so the results are compared bit for bit.

What cuDNN itself does on a GPU is tests/backends/test_cudnn.py's.
"""

import types
from contextlib import nullcontext

import numpy as np
import pytest
from ndlite_cupy import cudnn as conv_module

from ndlite.device import flags, get_backend
from ndlite.dtypes import HALF

ref = get_backend("numpy")


class Buffer(np.ndarray):
    """A NumPy array with CuPy's `.data.ptr`."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])


class FakeCupy:
    """The little of CuPy cudnn.py uses; remembers every buffer by its address."""

    def __init__(self):
        self.buffers, self.workspaces, self.stream = {}, [], 7
        self.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(
            ptr=self.stream))

    def keep(self, a):
        a = np.ascontiguousarray(a).view(Buffer)
        self.buffers[a.data.ptr] = a
        return a

    def empty(self, shape, dtype):
        a = self.keep(np.full(shape, np.nan if np.dtype(dtype).kind != "u" else 0, dtype))
        if np.dtype(dtype) == np.uint8:
            self.workspaces.append(a.size)
        return a

    def ascontiguousarray(self, a):
        return a if isinstance(a, Buffer) and a.flags.c_contiguous else self.keep(a)


NOTES = types.SimpleNamespace(**{n: n for n in (
    "TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION", "NONDETERMINISTIC",
    "FFT", "WINOGRAD")})
#: the stand-in's ranked engines: (name, numerical notes, workspace bytes)
ENGINES = [("tf32", {"TENSOR_CORE"}, 0), ("fft", {"FFT"}, 64),
           ("nondeterministic", {"NONDETERMINISTIC"}, 0), ("plain", set(), 256),
           ("backup", set(), 128)]


class FakeTensor:
    def __init__(self, graph, dim=None, stride=None, data_type=None):
        graph.uids += 1
        self.uid, self.dim, self.stride, self.data_type = graph.uids, dim, stride, data_type
        self.output = False

    def set_output(self, value):
        self.output = value
        return self

    def set_data_type(self, value):
        self.data_type = value
        return self

    def set_dim(self, value):
        self.dim = list(value)
        return self

    def set_stride(self, value):
        self.stride = list(value)
        return self

    def get_uid(self):
        return self.uid


class FakeGraph:
    """A conv graph as cudnn.pygraph builds, plans and runs it, on the NumPy backend."""

    def __init__(self, frontend, io_data_type, intermediate_data_type, compute_data_type,
                 handle):
        assert intermediate_data_type == compute_data_type == "FLOAT" and handle is not None
        self.frontend, self.io, self.uids, self.barred = frontend, io_data_type, 0, set()
        self.selected = self.built = None

    def tensor(self, name, dim, stride, data_type):
        return FakeTensor(self, list(dim), list(stride), data_type)

    def _node(self, kind, a, b, padding, stride, dilation, compute_data_type):
        assert compute_data_type == "FLOAT"
        self.kind, self.inputs, self.geometry = kind, (a, b), (stride, padding, dilation)
        self.out = FakeTensor(self)
        return self.out

    def conv_fprop(self, image, weight, **geometry):
        return self._node("fprop", image, weight, **geometry)

    def conv_dgrad(self, loss, filter, **geometry):
        return self._node("dgrad", loss, filter, **geometry)

    def conv_wgrad(self, image, loss, **geometry):
        return self._node("wgrad", image, loss, **geometry)

    def validate(self):
        assert self.out.output and self.out.data_type == self.io and self.out.dim
        if self.geometry[2][0] == 3:
            raise self.frontend.cudnnGraphNotSupportedError("no engine for dilation 3")

    def build_operation_graph(self):
        pass

    def create_execution_plans(self, modes):
        if modes[0] in self.frontend.refused_modes:
            raise RuntimeError(f"heuristics mode {modes[0]} cannot rank this graph")
        assert modes[1:] == ["FALLBACK"] and modes[0] in ("A", "B")
        self.frontend.modes.append(modes[0])

    def deselect_numeric_notes(self, notes):
        self.barred |= {i for i, (_, have, _) in enumerate(ENGINES) if have & set(notes)}

    def check_support(self):
        if len(self.barred) == len(ENGINES):
            raise self.frontend.cudnnGraphNotSupportedError("every engine deselected")

    def get_execution_plan_count(self):
        return len(ENGINES)

    def select_plan(self, index):
        self.selected = index

    def build_plans(self):
        if self.selected in self.barred:
            raise RuntimeError("barred_indices[index] == true")
        self.built = self.selected
        self.frontend.builds += 1

    def get_workspace_size(self):
        return ENGINES[self.built][2]

    def execute(self, buffers, workspace, handle=None, tensor_uids=None):
        if tensor_uids is not None:
            if self.frontend.refuse_ordered:
                raise TypeError("no ordered form here")
            buffers = dict(zip(tensor_uids, buffers))
        assert handle.stream == self.frontend.cupy.stream
        assert (workspace != 0) == (ENGINES[self.built][2] > 0)
        self.frontend.ran.append(ENGINES[self.built][0])
        arrays = {uid: self.frontend.cupy.buffers[ptr] for uid, ptr in buffers.items()}
        a, b = (arrays[t.uid].astype(np.float64) for t in self.inputs)
        out = arrays[self.out.uid]
        stride, padding, dilation = self.geometry
        dims = self.out.dim
        if self.kind == "fprop":
            geometry = (stride, padding, dilation, a.shape[1] // b.shape[1])
            value = ref.conv2d(a, b, *geometry)
        elif self.kind == "dgrad":
            geometry = (stride, padding, dilation, dims[1] // b.shape[1])
            value = ref.conv2d_grad_input(a, b, tuple(dims), *geometry)
        else:
            geometry = (stride, padding, dilation, a.shape[1] // dims[1])
            value = ref.conv2d_grad_weight(a, b, tuple(dims), *geometry)
        n, c, h, w = dims
        if self.out.stride != [c * h * w, h * w, w, 1]:  # cuDNN's choice: channels-last
            value = value.transpose(0, 2, 3, 1)
        out.reshape(-1)[...] = value.astype(out.dtype).reshape(-1)


class FakeFrontend:
    """The `cudnn` module as cudnn.py uses it."""

    class cudnnGraphNotSupportedError(Exception):
        pass

    numerical_note = NOTES
    heur_mode = types.SimpleNamespace(A="A", B="B", FALLBACK="FALLBACK")
    data_type = types.SimpleNamespace(FLOAT="FLOAT", HALF="HALF", BFLOAT16="BFLOAT16")

    def __init__(self, cupy):
        self.cupy, self.ran, self.builds, self.handles, self.refuse_ordered = cupy, [], 0, 0, False
        self.modes, self.refused_modes = [], set()

    def pygraph(self, **kwargs):
        return FakeGraph(self, **kwargs)

    def create_handle(self):
        self.handles += 1
        return types.SimpleNamespace(stream=0)

    def set_stream(self, handle, stream):
        handle.stream = stream


@pytest.fixture
def fake():
    cupy = FakeCupy()
    frontend = FakeFrontend(cupy)
    return conv_module.Convolutions(frontend, cupy, nullcontext()), frontend, cupy


CASES = [((2, 4, 9, 8), (6, 3, 3), (2, 1), (1, 0), (1, 2), 2),
         ((3, 3, 7, 7), (5, 1, 1), (1, 1), (2, 2), (1, 1), 1),
         ((1, 4, 10, 11), (4, 5, 3), (2, 2), (2, 1), (2, 1), 4)]


def _run(conv, cupy, case, dtype, capturing=False):
    (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups = case
    r = np.random.default_rng(0)
    x = r.standard_normal((n, c, h, w)).astype(dtype)
    weight = r.standard_normal((o, c // groups, kh, kw)).astype(dtype)
    geometry = (stride, padding, dilation, groups)
    y = conv.fprop(cupy.keep(x), cupy.keep(weight), *geometry, capturing)
    if y is None:
        return None
    grad = r.standard_normal(y.shape).astype(dtype)
    grad_x = conv.dgrad(cupy.keep(grad), cupy.keep(weight), x.shape, *geometry, capturing)
    strided = cupy.keep(np.concatenate([x, x], axis=3))[:, :, :, :w]  # made contiguous first
    grad_w = conv.wgrad(strided, cupy.keep(grad), weight.shape, *geometry, capturing)
    up = [a.astype(np.float64) for a in (x, weight, grad)]
    expected = (ref.conv2d(up[0], up[1], *geometry),
                ref.conv2d_grad_input(up[2], up[1], x.shape, *geometry),
                ref.conv2d_grad_weight(up[0], up[2], weight.shape, *geometry))
    for got, want in zip((y, grad_x, grad_w), expected, strict=True):
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want.astype(dtype))
    return y


@pytest.mark.parametrize("case", CASES, ids=str)
def test_float32_runs_the_deterministic_full_precision_engine(fake, case):
    conv, frontend, cupy = fake
    _run(conv, cupy, case, np.float32)
    assert frontend.ran == ["plain"] * 3 and frontend.handles == 1
    assert cupy.workspaces == [256] * 3  # each call's own, from the pool


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_halves_keep_tensor_cores(fake, dtype):
    conv, frontend, cupy = fake
    _run(conv, cupy, CASES[0], dtype)
    assert frontend.ran == ["tf32"] * 3


def test_allow_tf32_lets_float32_use_tensor_cores_as_another_graph(fake, monkeypatch):
    conv, frontend, cupy = fake
    _run(conv, cupy, CASES[0], np.float32)
    monkeypatch.setitem(flags.TF32, "conv", True)
    _run(conv, cupy, CASES[0], np.float32)
    assert frontend.ran == ["plain"] * 3 + ["tf32"] * 3 and len(conv.plans) == 6


def test_engines_are_ranked_by_heuristics_mode_b_else_mode_a(fake):
    conv, frontend, cupy = fake
    _run(conv, cupy, CASES[0], np.float32)
    frontend.refused_modes.add("B")
    _run(conv, cupy, CASES[1], np.float32)
    assert frontend.modes == ["B"] * 3 + ["A"] * 3 and frontend.ran == ["plain"] * 6


def test_graphs_are_planned_once_per_key_and_follow_the_current_stream(fake):
    conv, frontend, cupy = fake
    _run(conv, cupy, CASES[1], np.float32)
    cupy.stream = 11
    _run(conv, cupy, CASES[1], np.float32)
    assert frontend.builds == 3 and len(conv.plans) == 3 and len(frontend.ran) == 6


def test_a_declined_key_is_remembered_and_not_planned_again(fake):
    conv, frontend, cupy = fake
    case = ((1, 2, 9, 9), (2, 3, 3), (1, 1), (0, 0), (3, 3), 1)
    assert _run(conv, cupy, case, np.float32) is None
    assert _run(conv, cupy, case, np.float32) is None
    (why,) = conv.declined.values()
    assert "dilation 3" in why and frontend.ran == [] and not conv.plans


def test_nothing_is_planned_while_a_graph_records(fake):
    conv, frontend, cupy = fake
    assert _run(conv, cupy, CASES[2], np.float32, capturing=True) is None
    assert not conv.plans and not conv.declined  # ndlite's kernels ran; no verdict kept
    _run(conv, cupy, CASES[2], np.float32)  # a warm-up step plans it
    _run(conv, cupy, CASES[2], np.float32, capturing=True)  # then a recording runs it
    assert frontend.ran == ["plain"] * 6


def test_the_mapping_form_of_execute_when_the_ordered_one_is_refused(fake):
    conv, frontend, cupy = fake
    frontend.refuse_ordered = True
    _run(conv, cupy, CASES[0], np.float32)
    _run(conv, cupy, CASES[0], np.float32)
    assert all(plan.ordered is False for plan in conv.plans.values())
    assert "no ordered form" in conv.unordered and len(frontend.ran) == 6


def test_float64_and_empty_tensors_are_left_to_ndlite_s_kernels(fake):
    conv, frontend, cupy = fake
    assert _run(conv, cupy, CASES[0], np.float64) is None
    empty = cupy.keep(np.zeros((0, 4, 9, 8), np.float32))
    weight = cupy.keep(np.zeros((6, 2, 3, 3), np.float32))
    assert conv.fprop(empty, weight, (1, 1), (0, 0), (1, 1), 2) is None
    assert frontend.ran == [] and not conv.plans and not conv.declined


def test_every_output_stride_is_set_or_the_stand_in_scrambles_it(fake, monkeypatch):
    conv, frontend, cupy = fake
    monkeypatch.setattr(FakeTensor, "set_stride", lambda self, value: self)
    with pytest.raises(AssertionError):  # the trap, as the H100 probe met it
        _run(conv, cupy, CASES[1], np.float32)


def test_each_new_float32_plan_proves_its_first_result_once(fake):
    conv, frontend, cupy = fake
    seen = []

    def verify(kind, a, b, out, shapes, geometry):
        seen.append(kind)
        return "lower precision" if kind == "wgrad" else ""

    conv.verify = verify
    (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups = CASES[1]
    r = np.random.default_rng(3)
    x = cupy.keep(r.standard_normal((n, c, h, w)).astype(np.float32))
    weight = cupy.keep(r.standard_normal((o, c // groups, kh, kw)).astype(np.float32))
    geometry = (stride, padding, dilation, groups)
    for _ in range(2):
        y = conv.fprop(x, weight, *geometry)
        assert y is not None
        grad = cupy.keep(np.ones(y.shape, np.float32))
        assert conv.dgrad(grad, weight, x.shape, *geometry) is not None
        assert conv.wgrad(x, grad, weight.shape, *geometry) is None  # refused: ndlite's kernels
    # once per plan: wgrad's two allowed plans both refused, the key then left alone
    assert seen == ["fprop", "dgrad", "wgrad", "wgrad"]
    (why,) = conv.declined.values()
    assert why == "lower precision; 2 plan(s) tried" and len(conv.plans) == 2
    for dtype in HALF:  # halves are not judged against float32's bound
        _run(conv, cupy, CASES[0], dtype)
    assert seen == ["fprop", "dgrad", "wgrad", "wgrad"]


def test_a_plan_refused_by_the_check_gives_way_to_the_next_allowed_one(fake):
    conv, frontend, cupy = fake
    conv.verify = lambda *call: "lower precision" if frontend.ran[-1] == "plain" else ""
    _run(conv, cupy, CASES[0], np.float32)  # bitwise right results from the plan kept
    assert frontend.ran == ["plain", "backup"] * 3 and not conv.declined
    assert all(plan.workspace == 128 for plan in conv.plans.values())
    _run(conv, cupy, CASES[0], np.float32)
    assert frontend.ran[6:] == ["backup"] * 3 and cupy.workspaces[-3:] == [128] * 3


class NativeGraph(FakeGraph):
    """A FakeGraph that also exposes the frontend's private C++ execute (1.32's names), which
    cudnn.native_execute binds: each ranked plan has its own C++ index (10 + its rank)."""

    def __init__(self, frontend, handle, **kwargs):
        super().__init__(frontend, handle=handle, **kwargs)
        self.handle = handle
        self._plans = [types.SimpleNamespace(cpp=10 + i) for i in range(len(ENGINES))]
        self._lowered_graph = types.SimpleNamespace(_execute_plan_at_index=self._native)

    def _engine_for(self, config):
        return None  # no python engine: every plan is the backend's

    def _materialize_backend_plan(self, index):
        return types.SimpleNamespace(cpp_index=self._plans[index].cpp)

    def _native(self, pack, workspace, cpp_index, backend_handle, *overrides):
        assert cpp_index == 10 + self.built and backend_handle == 77
        assert overrides == (None, None, None) and isinstance(pack, dict)
        self.frontend.native += 1
        self.execute(pack, workspace, handle=self.handle)


def test_the_frontend_s_cpp_execute_is_called_directly_where_it_is_exposed(fake, monkeypatch):
    conv, frontend, cupy = fake
    frontend.native = 0
    monkeypatch.setattr(frontend, "pygraph", lambda **kwargs: NativeGraph(frontend, **kwargs))
    monkeypatch.setattr(frontend, "create_handle",
                        lambda: types.SimpleNamespace(stream=0, backend_handle=77))
    conv.verify = lambda *call: "lower precision" if frontend.ran[-1] == "plain" else ""
    _run(conv, cupy, CASES[0], np.float32)  # each key walks to its second plan: its own index
    _run(conv, cupy, CASES[0], np.float32)
    assert frontend.ran == ["plain", "backup"] * 3 + ["backup"] * 3 and frontend.native == 9
    assert all(plan.native and plan.native[1] == 14 for plan in conv.plans.values())
