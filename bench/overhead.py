"""Per-op overhead on tiny tensors, and a Linear layer's forward+backward at batch 4: ndlite on
the NumPy backend (grad recording off and on), raw NumPy, and PyTorch CPU eager when it is
installed, in one run. The measuring is `ndlite bench overhead` (ndlite/cli/bench/overhead.py);
this script keeps its result in bench/results/.

    python bench/overhead.py [--threads N] [--out overhead] [any `ndlite bench overhead` option]

Without PyTorch the run is partial: it goes to bench/results/overhead.partial.json and says so,
and the committed overhead.json stays. Targets (issue "Core"): <= 2 us per op without grad
recording (<= 2x PyTorch), <= 4 us with; the bias-free Linear at batch 4 no slower than PyTorch
at 5, 50 and 500 neurons.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_cli  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="overhead", help="results name in bench/results")
    args, rest = parser.parse_known_args(argv)
    return run_cli("overhead", args.out, rest)


if __name__ == "__main__":
    sys.exit(main())
