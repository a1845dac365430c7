"""The one-way tower (docs/DESIGN.md, "Layers"): no import cycle in ndlite/ or backends/,
and a backend imports nothing of the core but ndlite.device, ndlite.errors and ndlite.dtypes.
Read from the source with ast, so a new cycle fails here before it confuses anyone."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED_FOR_BACKENDS = ("ndlite.device", "ndlite.errors", "ndlite.dtypes")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT / "backends" if path.is_relative_to(ROOT / "backends") else ROOT)
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Modules `path` imports at module level or anywhere in functions (all of them)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # from pkg import submodule
    return found


def _graph() -> dict[str, set[str]]:
    files = list((ROOT / "ndlite").rglob("*.py")) + list((ROOT / "backends").rglob("*.py"))
    modules = {_module_name(f): f for f in files}
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    return graph


def _cycle(graph):
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle():
    graph = _graph()
    # a package's __init__ re-exporting its submodules is not a cycle of the code itself
    for name in graph:
        graph[name] = {m for m in graph[name] if not m.startswith(name + ".")}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_backends_import_only_the_device_layer():
    bad = []
    for path in (ROOT / "backends").rglob("*.py"):
        for module in _imports(path):
            if module.startswith("ndlite.") or module == "ndlite":
                if not module.startswith(ALLOWED_FOR_BACKENDS):
                    bad.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not bad, "\n".join(bad)
