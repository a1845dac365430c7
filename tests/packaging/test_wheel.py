"""The first hour of a new user: the built wheel, installed into a fresh venv without extras,
imports, runs the conformance kit, and leaves unrelated pytest runs alone, with hypothesis
and without it.

One wheel (`pip wheel --no-deps`) and one venv per test session; pip fetches the dependencies
(numpy, threadpoolctl, tqdm, hypothesis) and pytest from the package index. Where the index
cannot be reached the tests skip, saying so; any other install failure fails them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: what pip prints when it cannot reach an index (a skip), as opposed to a broken package
OFFLINE = re.compile(r"connection|resolve|network|timed out|No matching distribution|"
                     r"Could not find a version", re.IGNORECASE)
UNRELATED_TEST = "def test_arithmetic():\n    assert 1 + 1 == 2\n"


def _run(command, cwd, env, timeout=600):
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """(venv bin folder, a scratch folder outside the checkout, env without PYTHONPATH)."""
    base = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(base / "cache")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w",
                  str(base / "dist"), str(ROOT)], base, env)
    if built.returncode != 0 and OFFLINE.search(built.stdout + built.stderr):
        pytest.skip(f"cannot build the wheel offline: {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = next((base / "dist").glob("ndlite-*.whl"))
    venv = _run([sys.executable, "-m", "venv", str(base / "venv")], base, env)
    if venv.returncode != 0:
        pytest.skip(f"cannot create a venv here: {venv.stderr.strip()[-300:]}")
    bin_dir = base / "venv" / "bin"
    installed = _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel),
                      "pytest"], base, env)
    if installed.returncode != 0 and OFFLINE.search(installed.stdout + installed.stderr):
        pytest.skip("the package index cannot be reached to install ndlite's dependencies: "
                    + installed.stderr.strip()[-300:])
    assert installed.returncode == 0, installed.stdout + installed.stderr
    work = base / "work"
    work.mkdir()
    (work / "test_unrelated.py").write_text(UNRELATED_TEST)
    return bin_dir, work, env, wheel, built.stdout + built.stderr


def test_the_build_prints_no_setuptools_warning(fresh):
    log = fresh[4]
    assert "SetuptoolsDeprecationWarning" not in log and "SetuptoolsWarning" not in log, log


def test_the_wheel_has_the_license_kernels_and_data(fresh):
    names = zipfile.ZipFile(fresh[3]).namelist()
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert any(n.endswith(".cl") for n in names) and any(n.endswith(".cu") for n in names)
    assert any("mnist_subset" in n for n in names)
    assert not any(n.startswith(("tests/", "bench/")) for n in names)


def test_import_ndlite(fresh):
    bin_dir, work, env = fresh[:3]
    out = _run([str(bin_dir / "python"), "-c",
                "import ndlite, sys; print(ndlite.__file__); print(ndlite.tensor([1.0]).sum())"],
               work, env)
    assert out.returncode == 0, out.stderr
    assert "site-packages" in out.stdout.splitlines()[0]  # the wheel, not the checkout


def test_an_unrelated_pytest_run_passes_and_the_plugin_is_there(fresh):
    bin_dir, work, env = fresh[:3]
    out = _run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "test_unrelated.py"], work, env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout
    helped = _run([str(bin_dir / "python"), "-m", "pytest", "--help"], work, env)
    assert "--ndlite-backend" in helped.stdout  # the pytest11 plugin is installed and loads


def test_conformance_after_a_plain_install(fresh):
    bin_dir, work, env = fresh[:3]
    out = _run([str(bin_dir / "ndlite"), "conformance", "--backend", "numpy", "--ops", "add"],
               work, env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed, 0 failed" in out.stdout
    assert not (work / ".hypothesis").exists()  # hypothesis keeps its files in the cache


def test_the_installed_suite_runs_through_the_plugin(fresh):
    bin_dir, work, env = fresh[:3]
    out = _run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "--pyargs", "ndlite.testing.suite", "--ndlite-backend", "numpy",
                "-k", "test_op and (add or exp)"], work, env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed" in out.stdout and "failed" not in out.stdout


def test_without_hypothesis_pytest_still_runs_and_the_kit_says_what_is_missing(fresh):
    """Last in this file: it uninstalls hypothesis from the shared venv."""
    bin_dir, work, env = fresh[:3]
    removed = _run([str(bin_dir / "python"), "-m", "pip", "uninstall", "-y", "-q",
                    "hypothesis"], work, env)
    assert removed.returncode == 0, removed.stderr
    out = _run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "test_unrelated.py"], work, env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout
    kit = _run([str(bin_dir / "ndlite"), "conformance", "--backend", "numpy", "--ops", "add"],
               work, env)
    assert kit.returncode == 2
    assert "needs hypothesis" in kit.stderr and "pip install" in kit.stderr
    assert "Traceback" not in kit.stderr
