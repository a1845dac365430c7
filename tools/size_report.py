"""Print the size of the core and of each backend (lines of Python and kernel code), so growth
is seen in every CI log (STYLE.md: keep the core small enough to read in an afternoon)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"ndlite (core)": ROOT / "ndlite"} | {
    f"backend {p.name}": p for p in sorted((ROOT / "backends").glob("ndlite_*"))}


def lines(folder: Path) -> tuple[int, int]:
    python = sum(len(f.read_text().splitlines()) for f in folder.rglob("*.py"))
    kernels = sum(len(f.read_text().splitlines()) for ext in ("*.cl", "*.cu", "*.cuh")
                  for f in folder.rglob(ext))
    return python, kernels


for label, folder in PARTS.items():
    python, kernels = lines(folder)
    extra = f" + {kernels} lines of kernels" if kernels else ""
    print(f"size: {label}: {python} lines of Python{extra}")
