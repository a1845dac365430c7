"""Choosing backends: NDLITE_BACKEND (in fresh processes), set_backend, using, backend=,
unknown and unavailable names, entry-point plugins (working and broken), and a third-party
backend registered at run time."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ndlite_numpy import NumpyBackend

import ndlite
from ndlite.errors import BackendUnavailableError, DeviceMismatchError

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, env_extra=None, pythonpath=()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NDLITE_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(ROOT),
                                         env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_default_is_numpy_and_the_env_var_is_read_at_first_use():
    out = run_python("import ndlite; print(ndlite.zeros(1).device)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cpu"
    out = run_python("import ndlite; print(ndlite.zeros(1).device)",
                     {"NDLITE_BACKEND": "NumPy:0"})
    assert out.stdout.strip() == "cpu", out.stderr


def test_unknown_backend_name_is_a_clear_error():
    out = run_python("import ndlite; ndlite.zeros(1)", {"NDLITE_BACKEND": "tpu"})
    assert out.returncode != 0
    assert "BackendUnavailableError" in out.stderr and "'tpu'" in out.stderr
    assert "known:" in out.stderr and "numpy" in out.stderr


def test_unavailable_backend_says_why_and_how_to_fix():
    missing = [name for name in ("cupy", "opencl") if ndlite.device.probe(name)[0] is None]
    if not missing:
        pytest.skip("every built-in backend is available here")
    with pytest.raises(BackendUnavailableError) as info:
        ndlite.get_backend(missing[0])
    assert info.value.reason and info.value.fix
    assert "pip install" in str(info.value) or "OCL_ICD_VENDORS" in str(info.value)


def test_auto_picks_an_available_backend_and_says_which():
    out = run_python("import ndlite; print(ndlite.zeros(1).device)", {"NDLITE_BACKEND": "auto"})
    assert out.returncode == 0, out.stderr
    assert "NDLITE_BACKEND=auto chose" in out.stderr
    assert out.stdout.strip() in ("cpu",) or out.stdout.startswith(("cuda", "opencl"))


def test_set_backend_using_and_backend_argument(second_numpy):
    assert ndlite.zeros(1).device == "numpy"
    with ndlite.using("numpy2") as b:
        assert b is second_numpy and ndlite.ones(2).device == "numpy2"
        with ndlite.using("numpy"):
            assert ndlite.ones(2).device == "numpy"
        assert ndlite.randn(2).device == "numpy2"
    assert ndlite.tensor([1.0], backend="numpy2").device == "numpy2"
    assert ndlite.tensor([1.0], device="numpy2").device == "numpy2"
    previous = ndlite.current_backend()
    try:
        ndlite.set_backend("numpy2")
        assert ndlite.arange(3).device == "numpy2"
    finally:
        ndlite.set_backend(previous)


def test_third_party_backend_registered_at_run_time():
    calls = []

    class Traced(NumpyBackend):
        kind = name = "traced"

        def matmul(self, a, b):
            calls.append((a.shape, b.shape))
            return super().matmul(a, b)

    ndlite.register_backend("Traced", lambda device: Traced())  # names are case-insensitive
    x = ndlite.tensor(np.ones((2, 3)), backend="traced", requires_grad=True)
    w = ndlite.tensor(np.full((3, 1), 2.0), backend="traced")
    (x @ w).sum().backward()
    assert calls[0] == ((2, 3), (3, 1)) and len(calls) == 2  # forward and grad_x
    assert x.grad.device == "traced" and x.grad.tolist() == [[2.0] * 3] * 2
    with pytest.raises(DeviceMismatchError):
        x + ndlite.ones(2, 3)
    moved = x.to("numpy")
    moved.sum().backward()  # the gradient travels back across the transfer
    assert x.grad.tolist() == [[3.0] * 3] * 2


def _plugin(tmp_path: Path, module_body: str) -> Path:
    """An installed-looking distribution with an `ndlite.backends` entry point."""
    dist = tmp_path / "ndlite_plugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ndlite-plugin-demo\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text("[ndlite.backends]\ndemo = demo_backend:factory\n")
    (tmp_path / "demo_backend.py").write_text(textwrap.dedent(module_body))
    return tmp_path


def test_entry_point_plugin_is_discovered(tmp_path):
    path = _plugin(tmp_path, """
        from ndlite_numpy import NumpyBackend

        class Demo(NumpyBackend):
            kind = name = "demo"

        def factory(device):
            return Demo()
    """)
    out = run_python("import ndlite; x = ndlite.ones(2, backend='demo'); print(x.device, "
                     "(x + 1).tolist())", pythonpath=[path, ROOT / "backends"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "demo [2.0, 2.0]"


def test_a_broken_plugin_is_reported_not_fatal(tmp_path):
    path = _plugin(tmp_path, "raise RuntimeError('driver exploded')\n")
    out = run_python("""
        import json, ndlite
        from ndlite.cli.info import collect
        print(ndlite.zeros(1).device)
        print(json.dumps(collect()['backends']['demo']))
    """, pythonpath=[path, ROOT / "backends"])
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert first == "cpu"
    entry = json.loads(second)
    assert entry["available"] is False and "driver exploded" in entry["reason"]
