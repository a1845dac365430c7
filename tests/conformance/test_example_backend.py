"""The worked example of docs/writing-a-backend.md, examples/ndlite_example_backend, run as a
third party would: registered in-process, and installed (into a temporary folder) so that
ndlite finds it through its entry point and the kit's pytest plugin runs the suite on it."""

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

import ndlite
from ndlite.testing.runner import PASS, SKIP, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ndlite_example_backend"
FAST = settings(max_examples=10, derandomize=True, database=None, deadline=None)
OPS = ["add", "matmul", "sum", "exp", "amax", "getitem", "conv2d", "max_pool2d",
       "cross_entropy", "batch_norm"]


@pytest.fixture(scope="module")
def example_backend():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from ndlite_example import ExampleBackend
    finally:
        sys.path.remove(str(EXAMPLE))
    ndlite.register_backend("example", ExampleBackend)
    return ndlite.get_backend("example")


@pytest.mark.parametrize("op", OPS)
def test_the_example_passes_the_kit(example_backend, op):
    result = run(op, example_backend, "float32", FAST)
    assert result.status == PASS, result.reason
    assert run(op, example_backend, "float64", FAST).status == SKIP  # no float64: said so


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The example pip-installed into a folder of its own (no network, no change to .venv),
    built from a copy so that no build files land in the source tree."""
    try:
        importlib.metadata.distribution("ndlite")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("ndlite itself is not pip-installed here (a source checkout on PYTHONPATH); "
                    "these tests need its entry points: pip install -e . runs them")
    source = tmp_path_factory.mktemp("src") / EXAMPLE.name
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-compile", "--target", str(target),
                    str(source)], check=True, capture_output=True, timeout=300, cwd=target)
    env = dict(os.environ, PYTHONPATH=str(target))
    env.pop("NDLITE_BACKEND", None)
    return target, env


def test_installed_it_is_found_through_the_entry_point(installed):
    target, env = installed
    out = subprocess.run([sys.executable, "-m", "ndlite", "conformance", "--backend",
                          "example", "--ops", "matmul,log_softmax", "--max-examples", "5"],
                         env=env, cwd=target, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "example: CPU (the ndlite_example backend)" in out.stdout
    assert "does not report float64" in out.stdout


def test_installed_the_suite_runs_on_it_with_pytest_pyargs(installed):
    target, env = installed
    out = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "ndlite.testing.suite",
                          "--ndlite-backend", "example", "-k", "matmul or max_pool2d", "-rs",
                          "-p", "no:cacheprovider"],
                         env=dict(env, HYPOTHESIS_PROFILE="ci"), cwd=target,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ndlite backend example: available" in out.stdout
    assert " passed" in out.stdout and "does not report float64" in out.stdout  # said why
