"""The docs stay true to the code: docstring examples run, and docs/ops.md is the registry."""

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "ndlite", "ndlite.tensor", "ndlite.autograd", "ndlite.creation", "ndlite.dtypes",
    "ndlite.device.protocol", "ndlite.device.registry", "ndlite.ops.elementwise",
    "ndlite.ops.reduce", "ndlite.ops.movement", "ndlite.ops.indexing", "ndlite.ops.linalg",
    "ndlite.testing.gradcheck",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_ops_doc_is_generated_from_the_registry():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_ops_doc.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_readme_python_examples_run():
    text = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    assert blocks, "README.md has no Python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
