"""The CuPy backend's convolutions through cuDNN (backends/ndlite_cupy/cudnn.py).

On a GPU with the cuDNN frontend: over a grid of geometries (stride 1/2, padding 0/1/2,
dilation 1/2, groups 1/2/4, 1x1/3x3/5x5 kernels, batches 1 to 16, odd sizes) conv2d and both
gradients in float32 against the float64 reference (the tolerance policy's scaled rule for
contractions) and against ndlite's own kernels with cuDNN off; float16/bfloat16 against float64
with the half rules (the tight check fails a half accumulator); no TF32 on large shapes;
bitwise equal run to run; NDLITE_CUDNN=0 really taking ndlite's kernels; a few training steps
of the seed CNN giving the same losses on both paths; a CUDA-graph capture recording cuDNN.
Without CuPy, a GPU or the frontend, those skip saying why; the switch's parsing and the
module's imports are checked everywhere.
"""

import itertools
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest

import ndlite
from ndlite.device import get_backend
from ndlite.device.registry import probe
from ndlite.dtypes import HALF
from ndlite.nn import functional as F
from ndlite.testing.tolerance import SCALED, judge, tight_half

# ---- everywhere ---------------------------------------------------------------------------------


def test_the_module_imports_neither_cupy_nor_cudnn():
    code = ("import sys, ndlite_cupy.cudnn; "
            "print('cupy' in sys.modules, 'cudnn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False False"


@pytest.mark.parametrize("value, off", [("0", True), ("off", True), (" False ", True),
                                        ("no", True), ("1", False), ("", False)])
def test_NDLITE_CUDNN_parses(monkeypatch, value, off):
    from ndlite_cupy import cudnn

    monkeypatch.setenv("NDLITE_CUDNN", value)
    assert cudnn.switched_off() is off
    monkeypatch.delenv("NDLITE_CUDNN")
    assert cudnn.switched_off() is False  # on by default


def test_without_the_frontend_ndlite_info_says_why():
    from ndlite_cupy import cudnn

    module, why = cudnn.frontend()
    if module is not None:
        pytest.skip("the cuDNN frontend is installed here")
    assert why and cudnn.describe(None).startswith(f"off: {why}")


# ---- on a GPU with cuDNN ----------------------------------------------------------------------

BACKEND, WHY = probe("cupy")
CONV = getattr(BACKEND, "_cudnn", None)
if BACKEND is None:
    SKIP = f"backend cupy unavailable: {WHY}"
else:
    from ndlite_cupy import cudnn as _cudnn

    SKIP = f"cuDNN is {_cudnn.describe(None)}"
gpu = pytest.mark.skipif(CONV is None, reason=SKIP)
ref = get_backend("numpy")
KINDS = ("fprop", "dgrad", "wgrad")


def _grid() -> list:
    """(x shape, (O, kh, kw), stride, padding, dilation, groups): every combination of the
    five geometry choices, with a batch, channels and an (often odd) size drawn for each."""
    r = np.random.default_rng(15)
    cases = []
    for s, p, d, g, k in itertools.product((1, 2), (0, 1, 2), (1, 2), (1, 2, 4), (1, 3, 5)):
        span = d * (k - 1) + 1
        n = int(r.choice([1, 2, 3, 5, 8, 16]))
        cg, og = (int(v) for v in r.integers(1, 4, 2))
        h, w = (int(v) for v in r.integers(max(1, span - 2 * p), span + 10, 2))
        cases.append(((n, g * cg, h, w), (g * og, k, k), (s, s), (p, p), (d, d), g))
    return cases


GRID = _grid()


def _draw(case, dtype, seed=0):
    """x, weight and a grad_output held exactly by `dtype`, as float64 arrays."""
    (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups = case
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, c, h, w)).astype(dtype).astype(np.float64)
    weight = r.standard_normal((o, c // groups, kh, kw)).astype(dtype).astype(np.float64)
    y_shape = ref.conv2d(x[:1, :, :, :], weight, stride, padding, dilation, groups).shape
    grad = r.standard_normal((n,) + y_shape[1:]).astype(dtype).astype(np.float64)
    return x, weight, grad


def _on_gpu(a, dtype):
    return BACKEND.from_numpy(np.ascontiguousarray(a.astype(dtype)))


def _run(x, weight, grad, geometry, dtype) -> tuple:
    """fprop, dgrad, wgrad on the backend in `dtype`, as NumPy arrays."""
    gx, gw, gg = (_on_gpu(a, dtype) for a in (x, weight, grad))
    return (BACKEND.to_numpy(BACKEND.conv2d(gx, gw, *geometry)),
            BACKEND.to_numpy(BACKEND.conv2d_grad_input(gg, gw, x.shape, *geometry)),
            BACKEND.to_numpy(BACKEND.conv2d_grad_weight(gx, gg, weight.shape, *geometry)))


def _reference(x, weight, grad, geometry) -> tuple:
    """(float64 result, S = the same op on magnitudes, R = terms per sum) per kind."""
    stride, padding, dilation, groups = geometry
    (n, _, _, _), (o, cg, kh, kw), (_, _, oh, ow) = x.shape, weight.shape, grad.shape
    ax, aw, ag = np.abs(x), np.abs(weight), np.abs(grad)
    return (
        (ref.conv2d(x, weight, *geometry), ref.conv2d(ax, aw, *geometry), cg * kh * kw),
        (ref.conv2d_grad_input(grad, weight, x.shape, *geometry),
         ref.conv2d_grad_input(ag, aw, x.shape, *geometry), o // groups * kh * kw),
        (ref.conv2d_grad_weight(x, grad, weight.shape, *geometry),
         ref.conv2d_grad_weight(ax, ag, weight.shape, *geometry), n * oh * ow),
    )


@contextmanager
def cudnn_off():
    """ndlite's own kernels for the calls inside (halves on float32 copies, nn.py)."""
    BACKEND._cudnn = None
    try:
        yield
    finally:
        BACKEND._cudnn = CONV


@pytest.fixture
def executed(monkeypatch):
    """The cuDNN executions of the test: (kind of plan, recording?) per call."""
    calls = []
    original = CONV._execute

    def spy(plan, a, b, out):
        calls.append(BACKEND._recording is not None)
        return original(plan, a, b, out)

    monkeypatch.setattr(CONV, "_execute", spy)
    return calls


def _check(actual, reference, dtype, kind, case):
    value, scale, terms = reference
    verdict = judge(actual, value, SCALED, dtype, scale=scale, roundings=terms)
    assert verdict.ok, f"{kind} {np.dtype(dtype)} {case}: {verdict.message}"


@gpu
@pytest.mark.parametrize("case", GRID, ids=str)
def test_float32_matches_float64_and_ndlite_s_own_kernels(case, executed):
    geometry = case[2:]
    x, weight, grad = _draw(case, np.float32)
    got = _run(x, weight, grad, geometry, np.float32)
    ran = len(executed)
    with cudnn_off():
        own = _run(x, weight, grad, geometry, np.float32)
    assert len(executed) == ran  # cuDNN off: ndlite's kernels
    for kind, a, b, (value, scale, terms) in zip(KINDS, got, own, _reference(x, weight, grad,
                                                                             geometry)):
        _check(a, (value, scale, terms), np.float32, kind, case)
        _check(b, (value, scale, terms), np.float32, f"{kind} (ndlite's kernels)", case)
        _check(a, (b.astype(np.float64), 2 * scale, terms), np.float32, f"{kind} vs own", case)
    _declined(ran, case)


def _declined(ran: int, case) -> None:
    """xfail, with cuDNN's reasons, a case whose results were right but not all cuDNN's."""
    if ran < 3:
        pytest.xfail(f"cuDNN declined {3 - ran} of 3 for {case} (ndlite's kernels ran): "
                     f"{list(CONV.declined.values())[-(3 - ran):]}")


@gpu
@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("case", GRID[::3], ids=str)
def test_halves_run_in_cudnn_within_the_half_tolerance(case, dtype, executed):
    if dtype not in BACKEND.dtypes:
        pytest.skip(f"{dtype} is not in this CuPy's dtypes")
    assert not hasattr(BACKEND.conv2d, "__wrapped__")  # no float32 copies while cuDNN is on
    geometry = case[2:]
    x, weight, grad = _draw(case, dtype)
    got = _run(x, weight, grad, geometry, dtype)
    for kind, a, reference in zip(KINDS, got, _reference(x, weight, grad, geometry)):
        assert a.dtype == dtype
        _check(a, reference, dtype, kind, case)
        value, scale, terms = reference
        verdict = tight_half(a, value, dtype, scale=scale, roundings=terms)
        assert verdict.ok, f"{kind} {dtype} {case} (tight half): {verdict.message}"
    _declined(len(executed), case)


#: shapes where the probe saw TF32 errors (3e-4) or run-to-run differences before the filter
LARGE = [((8, 16, 14, 14), (32, 1, 1), (1, 1), (0, 0), (1, 1), 1),
         ((8, 16, 15, 15), (32, 3, 3), (2, 2), (1, 1), (1, 1), 1),
         ((32, 64, 32, 32), (64, 3, 3), (1, 1), (1, 1), (1, 1), 1),
         ((32, 128, 16, 16), (256, 3, 3), (2, 2), (1, 1), (1, 1), 1),
         ((16, 64, 17, 17), (64, 3, 3), (1, 1), (2, 2), (2, 2), 4)]


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@gpu
@pytest.mark.parametrize("case", LARGE, ids=str)
def test_float32_has_no_tf32_on_large_shapes(case):
    """Each element within 64 float32 epsilons of its own sum of magnitudes (the policy's
    contraction rule): TF32's 10-bit mantissa (eps 2^-10) misses it by far on these sizes,
    where a bound on the largest element alone cannot tell long float32 sums from TF32."""
    geometry = case[2:]
    x, weight, grad = _draw(case, np.float32, seed=1)
    got = _run(x, weight, grad, geometry, np.float32)
    bound = 64 * np.finfo(np.float32).eps
    for kind, a, (exact, scale, _) in zip(KINDS, got, _reference(x, weight, grad, geometry)):
        worst = (np.abs(a - exact) / (scale + 1e-30)).max()
        assert worst <= bound, f"{kind} {case}: error {worst:.2g} of |x||w| (TF32: ~5e-4)"


@gpu
@pytest.mark.parametrize("dtype", (np.dtype(np.float32), *HALF), ids=str)
@pytest.mark.parametrize("case", LARGE, ids=str)
def test_bitwise_equal_run_to_run(case, dtype):
    if dtype not in BACKEND.dtypes:
        pytest.skip(f"{dtype} is not in this CuPy's dtypes")
    geometry = case[2:]
    x, weight, grad = _draw(case, dtype, seed=2)
    first = _run(x, weight, grad, geometry, dtype)
    for _ in range(2):
        other = LARGE[(LARGE.index(case) + 1) % len(LARGE)]  # other work in between
        _run(*_draw(other, dtype), other[2:], dtype)
        again = _run(x, weight, grad, geometry, dtype)
        for kind, a, b in zip(KINDS, first, again):
            assert np.array_equal(_bits(a), _bits(b)), f"{kind} {dtype} {case} changed bits"


@gpu
@pytest.mark.parametrize("case", LARGE, ids=str)
def test_the_cpp_execute_is_used_and_equals_the_public_one_bitwise(case, monkeypatch):
    """The frontend's C++ execute that cudnn.native_execute binds (its private names) runs
    every plan here, and gives the bits of the frontend's public execute."""
    geometry = case[2:]
    x, weight, grad = _draw(case, np.float32, seed=4)
    fast = _run(x, weight, grad, geometry, np.float32)
    planned = [plan for plan in CONV.plans.values() if plan.native is not None]
    assert planned and all(plan.native for plan in planned), "the C++ execute was not found"
    monkeypatch.setattr(_cudnn, "native_execute", lambda *args: False)
    for plan in CONV.plans.values():
        monkeypatch.setattr(plan, "native", None)
    public = _run(x, weight, grad, geometry, np.float32)
    for kind, a, b in zip(KINDS, fast, public):
        assert np.array_equal(_bits(a), _bits(b)), f"{kind} {case}: the two executes differ"


@gpu
def test_NDLITE_CUDNN_0_takes_ndlite_s_kernels(monkeypatch):
    from ndlite_cupy import CupyBackend, nn

    im2col_calls = []
    im2col = nn.im2col
    monkeypatch.setattr(nn, "im2col", lambda *a: im2col_calls.append(1) or im2col(*a))
    case = GRID[19]  # stride 1, padding 1, dilation 1, groups 1, 3x3
    assert case[1][1:] == (3, 3) and case[2:] == ((1, 1), (1, 1), (1, 1), 1)
    x, weight, grad = _draw(case, np.float32)
    _run(x, weight, grad, case[2:], np.float32)  # plans, and checks each plan's first result
    im2col_calls.clear()  # (against ndlite's kernels)
    on = _run(x, weight, grad, case[2:], np.float32)
    assert im2col_calls == [] and BACKEND.info()["cudnn"].startswith("on (")
    monkeypatch.setenv("NDLITE_CUDNN", "0")
    off = CupyBackend()
    assert off._cudnn is None and off.info()["cudnn"].startswith("off (NDLITE_CUDNN=0")
    assert hasattr(off.conv2d, "__wrapped__")  # halves through float32 copies again
    xs, ws, gs = (off.from_numpy(a.astype(np.float32)) for a in (x, weight, grad))
    geometry = case[2:]
    got = (off.to_numpy(off.conv2d(xs, ws, *geometry)),
           off.to_numpy(off.conv2d_grad_input(gs, ws, x.shape, *geometry)),
           off.to_numpy(off.conv2d_grad_weight(xs, gs, weight.shape, *geometry)))
    assert len(im2col_calls) == 2  # forward and weight gradient: ndlite's im2col
    for kind, a, reference in zip(KINDS, got, _reference(x, weight, grad, geometry)):
        _check(a, reference, np.float32, kind, case)
    for kind, a, reference in zip(KINDS, on, _reference(x, weight, grad, geometry)):
        _check(a, reference, np.float32, kind, case)


def _train(steps, batches):
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(BACKEND)
    opt = ndlite.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches[:steps]:
        opt.zero_grad()
        loss = F.nll_loss(model(ndlite.tensor(x, backend=BACKEND)),
                          ndlite.tensor(y, backend=BACKEND))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy() for p in model.parameters()]


def _batches(count, n=16):
    r = np.random.default_rng(3)
    return [(r.random((n, 1, 28, 28), dtype=np.float32), r.integers(0, 10, n))
            for _ in range(count)]


@gpu
def test_training_steps_of_the_seed_cnn_agree_on_both_paths(executed):
    batches = _batches(3)
    losses, params = _train(3, batches)
    # per step: 3 convs, 3 weight gradients, 2 input gradients (none for the data): each key
    # planned and kept, or declined by the first-result check after its plans were tried
    weights = {(32, 1, 5, 5), (64, 32, 5, 5), (128, 64, 3, 3)}
    keys = [k for k in (*CONV.plans, *CONV.declined)
            if k[1] == np.float32 and k[2][0] == 16 and tuple(k[3]) in weights and not k[-1]]
    assert len(keys) == 8, keys
    declined = {k: CONV.declined[k] for k in keys if k in CONV.declined}
    assert all(k[0] != "fprop" for k in declined), declined  # the forwards run on cuDNN
    assert all("plan(s) tried" in why for why in declined.values()), declined
    assert len(executed) >= 3 * (8 - len(declined))
    with cudnn_off():
        own_losses, own_params = _train(3, batches)
    np.testing.assert_allclose(losses, own_losses, rtol=1e-5)
    for p, q in zip(params, own_params, strict=True):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-6)


@gpu
def test_a_captured_step_records_cudnn_and_replays_like_eager_steps(executed):
    batches = _batches(4)
    eager_losses, eager_params = _train(4, batches)
    ndlite.manual_seed(0)
    model = ndlite.nn.models.mnist_cnn().to(BACKEND)
    opt = ndlite.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    graph = ndlite.cuda.capture(step, *batches[0], optimizers=[opt], warmup=1)
    assert any(executed), "the recording ran no cuDNN convolution"
    losses = [graph.warmup_outputs.item()] + [graph(x, y).item() for x, y in batches[1:]]
    assert losses == eager_losses
    for p, q in zip((p.detach().numpy() for p in model.parameters()), eager_params,
                    strict=True):
        np.testing.assert_array_equal(p, q)


@gpu
def test_the_first_result_check_tells_float32_from_tf32():
    """cudnn_agrees, which every new float32 plan passes once: a result with TF32's rounding
    of the inputs (10-bit mantissas) is refused, the float32 one accepted."""
    import cupy
    from ndlite_cupy import nn

    case = ((4, 32, 12, 12), (64, 5, 5), (1, 1), (0, 0), (1, 1), 1)
    geometry = case[2:]
    x, weight, grad = (cupy.asarray(a.astype(np.float32)) for a in _draw(case, np.float32))
    shapes = (x.shape, weight.shape, grad.shape)
    with cudnn_off():
        exact = BACKEND.conv2d_grad_weight(x, grad, weight.shape, *geometry)

    def tf32(a):  # round to nearest on the 13 low mantissa bits
        bits = a.view(np.uint32)
        return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)

    with cudnn_off():
        rough = BACKEND.conv2d_grad_weight(tf32(x), tf32(grad), weight.shape, *geometry)
    assert nn.cudnn_agrees(BACKEND, "wgrad", x, grad, exact, shapes, geometry) == ""
    assert "TF32" in nn.cudnn_agrees(BACKEND, "wgrad", x, grad, rough, shapes, geometry)
