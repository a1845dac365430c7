"""`ndlite conformance` as a user sees it in a terminal or a log: each row once (the table on
stdout, no per-run lines on stderr), and no .hypothesis/ folder left in the current
directory."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_rows_print_once_and_no_hypothesis_folder_is_left(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'backends'}",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run([sys.executable, "-m", "ndlite", "conformance", "--backend", "numpy",
                          "--ops", "add,exp", "--max-examples", "3"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    both = out.stdout + out.stderr
    for row in ("add              numpy    float32", "exp (2nd order)  numpy    float64"):
        assert both.count(row) == 1, both
    assert "6 passed, 0 failed" in out.stdout
    assert not (work / ".hypothesis").exists()
    assert (tmp_path / "cache" / "ndlite" / "hypothesis").is_dir()
