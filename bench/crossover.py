"""Where a GPU starts to pay: a Linear layer's forward + backward at batch 4, and an MLP's
training step by batch size, on every backend given. The measuring is `ndlite bench crossover`
(ndlite/cli/bench/crossover.py); this script keeps its result and plot in bench/results/.

    python bench/crossover.py [--backends numpy cupy opencl:gpu] [--out crossover]
                              [any `ndlite bench crossover` option]

A backend that is named but cannot run makes the run partial: bench/results/<out>.partial.json
(the committed <out>.json stays), saying which backend and why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, run_cli  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="crossover", help="results name in bench/results")
    parser.add_argument("--backends", nargs="+", default=["numpy", "cupy", "opencl:gpu"])
    args, rest = parser.parse_known_args(argv)
    if "--plot" not in rest and "--no-plot" not in rest:
        rest += ["--plot", str(RESULTS / f"{args.out.removesuffix('.json')}.png")]
    return run_cli("crossover", args.out, ["--backends", *args.backends, *rest])


if __name__ == "__main__":
    sys.exit(main())
