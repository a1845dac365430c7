"""The size budget (docs/STYLE.md): print the size of the core and of each backend, so growth
is seen in every CI log, and fail `make test` when a Python file in ndlite/ or backends/ is
over 400 lines or a function over 60, unless ALLOWED names it with the reason it reads better
whole."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"ndlite (core)": ROOT / "ndlite"} | {
    f"backend {p.name}": p for p in sorted((ROOT / "backends").glob("ndlite_*"))}
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60

#: "path" or "path:function" -> why that unit is allowed to be longer
ALLOWED: dict[str, str] = {}


def lines(folder: Path) -> tuple[int, int]:
    python = sum(len(f.read_text().splitlines()) for f in folder.rglob("*.py"))
    kernels = sum(len(f.read_text().splitlines()) for ext in ("*.cl", "*.cu", "*.cuh")
                  for f in folder.rglob(ext))
    return python, kernels


def over_budget(path: Path) -> list[str]:
    """What in this file is over budget and not allowed, one line each."""
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text()
    found = []
    n = len(text.splitlines())
    if n > MAX_FILE_LINES and rel not in ALLOWED:
        found.append(f"{rel}: {n} lines (budget {MAX_FILE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and f"{rel}:{node.name}" not in ALLOWED:
                found.append(f"{rel}:{node.lineno} {node.name}: {length} lines "
                             f"(budget {MAX_FUNCTION_LINES})")
    return found


def main() -> int:
    for label, folder in PARTS.items():
        python, kernels = lines(folder)
        extra = f" + {kernels} lines of kernels" if kernels else ""
        print(f"size: {label}: {python} lines of Python{extra}")
    problems = [p for folder in PARTS.values() for f in sorted(folder.rglob("*.py"))
                for p in over_budget(f)]
    for problem in problems:
        print(f"size: over budget: {problem}")
    if problems:
        print("size: split these, or add them to ALLOWED in tools/size_report.py with the "
              "reason a longer unit reads better")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
