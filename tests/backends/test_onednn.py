"""The NumPy backend's float32 convolutions through oneDNN (onednn.py; the optional
onednn-cpu-gomp package) against float64 references written here and against nn.py's own
path: values and both gradients over strides, padding, dilation, groups, batch 1, odd sizes and
non-contiguous inputs; bitwise determinism at a fixed thread count; the NDLITE_ONEDNN=0 switch
and the fallbacks. Skipped, with the reason, where libdnnl.so.3 is not installed."""

import os
import subprocess
import sys
from pathlib import Path

import ndlite_numpy.nn as nn
import ndlite_numpy.onednn as onednn
import ndlite_numpy.threads as threads
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.skipif(not onednn.available(), reason=f"oneDNN {onednn.status()}")
ROOT = Path(__file__).resolve().parents[2]


def _windows(xp, i, j, geometry, out_hw):
    (sh, sw), _, (dh, dw), _ = geometry
    oh, ow = out_hw
    return xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]


def reference(x, weight, grad, geometry):
    """Forward, input gradient and weight gradient in float64, one kernel offset at a time."""
    _, (ph, pw), _, groups = geometry
    x, weight, grad = (np.asarray(a, np.float64) for a in (x, weight, grad))
    o, cg, kh, kw = weight.shape
    og = o // groups
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros(grad.shape)
    gxp, gw = np.zeros(xp.shape), np.zeros(weight.shape)
    for i in range(kh):
        for j in range(kw):
            win = _windows(xp, i, j, geometry, grad.shape[2:])
            gwin = _windows(gxp, i, j, geometry, grad.shape[2:])
            for g in range(groups):
                os_, cs = slice(g * og, (g + 1) * og), slice(g * cg, (g + 1) * cg)
                w = weight[os_, :, i, j]
                out[:, os_] += np.einsum("nchw,oc->nohw", win[:, cs], w)
                gwin[:, cs] += np.einsum("nohw,oc->nchw", grad[:, os_], w)
                gw[os_, :, i, j] = np.einsum("nohw,nchw->oc", grad[:, os_], win[:, cs])
    return out, gxp[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]], gw


def through_onednn(x, weight, grad, geometry):
    got = (onednn.conv2d(x, weight, *geometry),
           onednn.conv2d_grad_input(grad, weight, x.shape, *geometry),
           onednn.conv2d_grad_weight(x, grad, weight.shape, *geometry))
    assert all(a is not None and a.dtype == np.float32 for a in got)
    return got


def assert_close(got, want, what=""):
    for name, a, b in zip(("forward", "grad_input", "grad_weight"), got, want, strict=True):
        assert a.shape == b.shape, (what, name)
        scale = max(float(np.abs(b).max()), 1.0)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5 * scale, err_msg=f"{what} {name}")


@st.composite
def conv_case(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ph, pw = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    lo_h, lo_w = max(1, dh * (kh - 1) + 1 - 2 * ph), max(1, dw * (kw - 1) + 1 - 2 * pw)
    h, w = draw(st.integers(lo_h, lo_h + 9)), draw(st.integers(lo_w, lo_w + 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal((draw(st.integers(1, 5)), groups * cg, h, w), dtype=np.float32)
    weight = rng.standard_normal((groups * og, cg, kh, kw), dtype=np.float32)
    geometry = ((sh, sw), (ph, pw), (dh, dw), groups)
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    grad = rng.standard_normal((x.shape[0], groups * og, oh, ow), dtype=np.float32)
    return x, weight, grad, geometry


@settings(max_examples=120, deadline=None)
@given(conv_case(), st.sampled_from([1, 2]))
def test_against_float64_reference(case, n_threads):
    x, weight, grad, geometry = case
    with threads.forced(n_threads):
        got = through_onednn(x, weight, grad, geometry)
    assert_close(got, reference(x, weight, grad, geometry), str(geometry))


# the layers of bench/cpu_models.py's VGG-style net and seed CNN, and other common ones
LAYERS = [((32, 3, 32, 32), (32, 3, 3, 3), 1, 1), ((32, 32, 16, 16), (64, 32, 3, 3), 1, 1),
          ((32, 128, 8, 8), (128, 128, 3, 3), 1, 1), ((128, 1, 28, 28), (32, 1, 5, 5), 0, 1),
          ((16, 32, 12, 12), (64, 32, 5, 5), 0, 1), ((8, 64, 4, 4), (128, 64, 3, 3), 0, 1),
          ((4, 16, 15, 13), (24, 16, 3, 3), 1, 2), ((3, 8, 9, 9), (8, 8, 1, 1), 0, 1),
          ((1, 5, 7, 7), (7, 5, 2, 2), 0, 2)]


@pytest.mark.parametrize("x_shape, w_shape, padding, stride", LAYERS)
def test_against_numpy_path(x_shape, w_shape, padding, stride):
    """The same answers as nn.py's own path (numba kernels where installed), which the other
    backends' tests hold to the references."""
    rng = np.random.default_rng(2)
    x, weight = (rng.standard_normal(s, dtype=np.float32) for s in (x_shape, w_shape))
    geometry = ((stride, stride), (padding, padding), (1, 1), 1)
    out = nn.conv2d(x, weight, *geometry)
    grad = rng.standard_normal(out.shape, dtype=np.float32)
    got = (out, nn.conv2d_grad_input(grad, weight, x.shape, *geometry),
           nn.conv2d_grad_weight(x, grad, weight.shape, *geometry))
    assert np.array_equal(got[0], onednn.conv2d(x, weight, *geometry))  # nn.py serves oneDNN's
    with onednn.disabled():
        want = (nn.conv2d(x, weight, *geometry),
                nn.conv2d_grad_input(grad, weight, x.shape, *geometry),
                nn.conv2d_grad_weight(x, grad, weight.shape, *geometry))
    assert_close(got, want, str((x_shape, w_shape)))


def test_operands_larger_than_the_scratch_cache_stay_alive(monkeypatch):
    """A blocked operand too large for scratch.py's cache is a fresh array that oneDNN only
    knows by address: it must live until the primitive has run (a 10,000-image evaluation of
    the seed CNN crashed on a freed one). With a 64 KiB scratch limit every buffer here is one."""
    import ndlite_numpy.scratch as scratch

    monkeypatch.setattr(scratch, "LIMIT", 64 << 10)
    scratch.clear()
    rng = np.random.default_rng(5)
    for x_shape, w_shape, padding, stride in LAYERS[:3]:
        x, weight = (rng.standard_normal(s, dtype=np.float32) for s in (x_shape, w_shape))
        geometry = ((stride, stride), (padding, padding), (1, 1), 1)
        grad = rng.standard_normal(onednn.conv2d(x, weight, *geometry).shape, dtype=np.float32)
        for _ in range(3):  # other allocations in between would reuse a freed block
            got = through_onednn(x, weight, grad, geometry)
            junk = [np.full(s, 7.0, np.float32) for s in (x_shape, w_shape)]
        assert_close(got, reference(x, weight, grad, geometry), str(x_shape))
    del junk
    scratch.clear()


def test_non_contiguous_inputs():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 9, 10, 4), dtype=np.float32).transpose(3, 0, 1, 2)[:, ::2]
    weight = rng.standard_normal((5, 3, 3, 7), dtype=np.float32).transpose(0, 1, 3, 2)[:, :, :3]
    geometry = ((1, 2), (1, 0), (1, 1), 1)
    out = onednn.conv2d(x, weight, *geometry)
    grad = rng.standard_normal(out.shape[::-1], dtype=np.float32).T  # (F order)
    got = through_onednn(x, weight, grad, geometry)
    assert_close(got, reference(x, weight, grad, geometry))


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_bitwise_deterministic(n_threads):
    """Run to run at a fixed thread count, and with the primitive made afresh."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 64, 16, 16), dtype=np.float32)
    weight = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    grad = rng.standard_normal((32, 64, 16, 16), dtype=np.float32)
    geometry = ((1, 1), (1, 1), (1, 1), 1)
    with threads.forced(n_threads):
        first = through_onednn(x, weight, grad, geometry)
        runs = [through_onednn(x, weight, grad, geometry) for _ in range(3)]
        onednn._cache.clear()
        runs.append(through_onednn(x, weight, grad, geometry))
    for run in runs:
        for a, b in zip(first, run, strict=True):
            assert np.array_equal(a, b)


def test_openmp_count_given_back():
    """The run sets libgomp's count (shared with PyTorch in one process) and restores it."""
    before = onednn._gomp.omp_get_max_threads()
    x, weight = np.ones((2, 4, 6, 6), np.float32), np.ones((4, 4, 3, 3), np.float32)
    with threads.forced(before + 1):
        assert onednn.conv2d(x, weight, (1, 1), (0, 0), (1, 1), 1)[0, 0, 0, 0] == 36
    assert onednn._gomp.omp_get_max_threads() == before


def test_declines_what_it_cannot_take(monkeypatch):
    """float64 and float16 stay on nn.py's path; a geometry oneDNN declines (no primitive)
    falls back there too."""
    rng = np.random.default_rng(5)
    x, weight = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    geometry = ((1, 1), (0, 0), (1, 1), 1)
    assert onednn.conv2d(x, weight, *geometry) is None
    assert onednn.conv2d(x.astype(np.float16), weight.astype(np.float16), *geometry) is None
    assert onednn.conv2d(x.astype(np.float32), weight, *geometry) is None  # mixed: float64
    assert nn.conv2d(x, weight, *geometry).dtype == np.float64
    monkeypatch.setattr(onednn, "_plan", lambda *args: None)
    x32, w32 = x.astype(np.float32), weight.astype(np.float32)
    assert onednn.conv2d(x32, w32, *geometry) is None
    out = nn.conv2d(x32, w32, *geometry)
    grad = np.ones_like(out)
    assert_close((out, nn.conv2d_grad_input(grad, w32, x.shape, *geometry),
                  nn.conv2d_grad_weight(x32, grad, weight.shape, *geometry)),
                 reference(x, weight, grad, geometry))


def test_reported_in_info():
    info = pytest.importorskip("ndlite_numpy").NumpyBackend().info()
    assert info["onednn"].startswith("oneDNN 3.") and "threads" in info["onednn"]


def test_switched_off_by_environment():
    """NDLITE_ONEDNN=0: off, said so in info(), and the convolutions run on nn.py's path."""
    code = ("import numpy as np; import ndlite_numpy.onednn as o, ndlite_numpy.nn as nn; "
            "x = np.ones((2, 3, 5, 5), np.float32); w = np.ones((4, 3, 3, 3), np.float32); "
            "g = ((1, 1), (1, 1), (1, 1), 1); assert o.conv2d(x, w, *g) is None; "
            "assert nn.conv2d(x, w, *g)[0, 0, 2, 2] == 27; print(o.status())")
    env = {**os.environ, "NDLITE_ONEDNN": "0",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "backends")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "off (NDLITE_ONEDNN=0)"


def _conv_in_child(queue):
    x, weight = np.ones((4, 8, 6, 6), np.float32), np.ones((8, 8, 3, 3), np.float32)
    queue.put((onednn.available(), float(nn.conv2d(x, weight, (1, 1), (1, 1), (1, 1), 1)[0, 0,
                                                                                       2, 2])))


def test_forked_child_runs_without_it():
    """libgomp's pool does not survive fork(): a child of a process that ran oneDNN would hang
    in its next convolution, so there oneDNN is off and nn.py's path runs."""
    import multiprocessing

    x, weight = np.ones((4, 8, 6, 6), np.float32), np.ones((8, 8, 3, 3), np.float32)
    with threads.forced(2):
        assert onednn.conv2d(x, weight, (1, 1), (1, 1), (1, 1), 1)[0, 0, 2, 2] == 72
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_conv_in_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung")
    assert queue.get(timeout=5) == (False, 72.0)


def test_primitives_dropped_from_the_cache(monkeypatch):
    """Past MAX_CACHED the least recently used primitives are dropped (and destroyed); the
    ones made again give the same answers."""
    monkeypatch.setattr(onednn, "MAX_CACHED", 2)
    rng = np.random.default_rng(6)
    cases = []
    for size in (5, 6, 7, 8, 9):
        x = rng.standard_normal((2, 3, size, size), dtype=np.float32)
        weight = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
        grad = rng.standard_normal((2, 4, size - 2, size - 2), dtype=np.float32)
        cases.append((x, weight, grad))
    geometry = ((1, 1), (0, 0), (1, 1), 1)
    first = [through_onednn(*case, geometry) for case in cases]
    assert len(onednn._cache) <= 2
    for case, before in zip(cases, first, strict=True):
        again = through_onednn(*case, geometry)
        assert all(np.array_equal(a, b) for a, b in zip(before, again, strict=True))
        assert_close(again, reference(*case, geometry))


def test_a_failed_run_leaves_the_call_to_nn_py(monkeypatch):
    """A primitive whose run fails (dnnl_primitive_execute's status) gives None: nn.py's
    paths compute the convolution instead of an error reaching the user."""
    def failing(n_threads, fn):
        raise onednn.DnnlError("oneDNN dnnl_primitive_execute failed with status 2")

    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 6, 6), dtype=np.float32)
    weight = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    geometry = ((1, 1), (1, 1), (1, 1), 1)
    want = nn.conv2d(x, weight, *geometry)
    monkeypatch.setattr(onednn, "_locked", failing)
    assert onednn.conv2d(x, weight, *geometry) is None
    with onednn.disabled():
        np.testing.assert_allclose(nn.conv2d(x, weight, *geometry), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nn.conv2d(x, weight, *geometry), want, rtol=1e-5, atol=1e-5)
