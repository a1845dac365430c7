"""Write docs/ops.md, the list of every op, from the op registry (the one source of truth).

    python tools/gen_ops_doc.py          # rewrite docs/ops.md
    python tools/gen_ops_doc.py --check  # exit 1 if docs/ops.md is out of date
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DOC = ROOT / "docs" / "ops.md"


def render() -> str:
    from ndlite.ops import OPS, resolve

    lines = [
        "# Ops",
        "",
        "Generated from the op registry by `python tools/gen_ops_doc.py`; do not edit by hand.",
        "Every row is tested from its spec: values and gradients against the NumPy float64",
        "reference on every backend (the conformance kit), and a float64 finite-difference",
        "gradcheck where it is differentiable.",
        "",
        "| op | module | called as | kind | gradient | 2nd order | tolerance | inputs drawn by |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in sorted(OPS):
        op = OPS[name]
        spec = op.spec
        fn = resolve(op)
        module = (op.function or op).__module__.rsplit(".", 1)[-1]
        call = f"{fn.__module__}.{fn.__qualname__}".replace(".<locals>", "")
        kind = "composed" if op.composite else "op"
        lines.append(f"| `{name}` | {module} | `{call}` | {kind} | "
                     f"{'yes' if spec.grad else 'no'} | {'yes' if spec.second_order else ''} | "
                     f"{spec.tol} | `{spec.sample.name}` |")
    return "\n".join(lines) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/ops.md is out of date: run python tools/gen_ops_doc.py")
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
