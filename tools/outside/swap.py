"""Load an outside PyTorch program with only its import lines pointed at ndlite.

    from swap import load_module, run_script
    mod = load_module("path/to/model.py", "ndlite")   # or "torch": the file unchanged

Lines that import torch (`import torch`, `import torch.nn as nn`, `from torch.nn import
functional as F`, ...) become the same import of ndlite; `import torch.onnx` is dropped
(ndlite has no ONNX exporter; the programs use it only behind a flag). Nothing else in
the file changes. `changed_lines` lists what was replaced, for the record.

`load_module(path, lib, keep=...)` can also keep only the file's imports, functions and
classes (for scripts like ng-video-lecture's gpt.py that train at import time): their
module-level names (hyper-parameters, data) are then supplied by the caller in `env`.

`run_script(path, argv, lib)` runs a file as __main__ (sys.argv = [path] + argv), and its
sibling modules (word_language_model's `import data`, `from model import ...`) are loaded
with the same swap.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import os
import re
import sys
import types

_IMPORT = re.compile(r"^(\s*)(import|from)\s+torch(\.[\w.]+)?\b(.*)$")
DROPPED = {"torch.onnx"}


def swap_line(line: str) -> str | None:
    """The ndlite version of one import line, or None when the line is not a torch import."""
    m = _IMPORT.match(line)
    if not m:
        return None
    indent, kw, sub, rest = m.groups()
    name = "torch" + (sub or "")
    if kw == "import" and name in DROPPED and not rest.strip():
        return f"{indent}pass  # dropped: import {name}"
    if kw == "import" and " as " not in rest:  # `import torch[.nn]` binds the name torch
        extra = f"import ndlite{sub}; " if sub else ""
        return f"{indent}{extra}import ndlite as torch{rest}"
    return f"{indent}{kw} ndlite{sub or ''}{rest}"


def swap_source(text: str) -> tuple[str, list[tuple[str, str]]]:
    out, changed = [], []
    for line in text.splitlines():
        new = swap_line(line)
        if new is not None and new != line:
            changed.append((line.strip(), new.strip()))
            line = new
        out.append(line)
    return "\n".join(out) + "\n", changed


changed_lines: dict[str, list] = {}


def _keep_definitions(tree: ast.Module) -> ast.Module:
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    tree.body = [node for node in tree.body if isinstance(node, kinds)]
    return tree


def load_module(path: str, lib: str, name: str | None = None, keep: str = "all",
                env: dict | None = None) -> types.ModuleType:
    """Execute `path` as a fresh module with torch (`lib="torch"`, the file as it is) or
    ndlite (`lib="ndlite"`, import lines swapped). keep="definitions" runs only imports,
    defs and classes, with `env` as the module's other globals."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if lib == "ndlite":
        text, changed = swap_source(text)
        changed_lines[path] = changed
    tree = ast.parse(text, filename=path)
    if keep == "definitions":
        tree = _keep_definitions(tree)
    name = name or f"outside_{lib}_{os.path.splitext(os.path.basename(path))[0]}"
    module = types.ModuleType(name)
    module.__file__ = os.path.abspath(path)
    module.__dict__.update(env or {})
    sys.modules[name] = module  # dataclasses look their module up while the body runs
    exec(compile(tree, path, "exec"), module.__dict__)
    return module


class _SiblingFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of modules that live beside the script load with the swap too."""

    def __init__(self, folder: str):
        self.folder = folder

    def find_spec(self, fullname, path=None, target=None):
        candidate = os.path.join(self.folder, fullname + ".py")
        if "." in fullname or not os.path.exists(candidate):
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=candidate)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        path = module.__spec__.origin
        with open(path, encoding="utf-8") as f:
            text, changed = swap_source(f.read())
        changed_lines[path] = changed
        module.__file__ = path
        exec(compile(text, path, "exec"), module.__dict__)


def run_script(path: str, argv: list[str], lib: str = "ndlite") -> dict:
    """Run `path` as __main__ from its own folder, as `python path argv...` would."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    sys.argv = [path] + list(argv)
    sys.path.insert(0, folder)
    if lib == "ndlite":
        sys.meta_path.insert(0, _SiblingFinder(folder))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if lib == "ndlite":
        text, changed_lines[path] = swap_source(text)
    globs = {"__name__": "__main__", "__file__": path}
    exec(compile(text, path, "exec"), globs)
    return globs
