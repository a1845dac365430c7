"""`ndlite info` lists every backend, available or why not, and exits 0."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ndlite_cli(*args, env_extra=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "ndlite", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_info_lists_every_backend():
    out = ndlite_cli("info")
    assert out.returncode == 0, out.stderr
    assert "numpy    available" in out.stdout
    for name in ("cupy", "opencl"):
        assert name in out.stdout  # available, or unavailable with the reason and the fix


def test_info_json_is_machine_readable():
    out = ndlite_cli("info", "--json")
    report = json.loads(out.stdout)
    numpy = report["backends"]["numpy"]
    assert numpy["available"] and numpy["fp64"] is True and "numpy" in numpy
    for entry in report["backends"].values():
        assert entry["available"] or entry["reason"]


def test_info_reports_a_bad_default_instead_of_crashing():
    out = ndlite_cli("info", env_extra={"NDLITE_BACKEND": "nonsense"})
    assert out.returncode == 0
    assert "default backend: error" in out.stdout and "nonsense" in out.stdout


def test_no_command_prints_help_and_fails():
    out = ndlite_cli()
    assert out.returncode == 2 and "info" in out.stdout
