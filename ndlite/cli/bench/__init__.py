"""`ndlite bench`: measure on your own machine what the README claims on ours.

    ndlite bench crossover    where each backend starts to beat the CPU (table + PNG)
    ndlite bench overhead     per-op time on tiny tensors against NumPy and PyTorch
    ndlite bench train        the seed CNN's MNIST epoch against PyTorch

Each prints what it compares and where (CPU model, cores, threads, devices), shows a progress
bar, and writes its results with those facts and library versions to JSON. A comparison that
cannot run here (PyTorch not installed, a backend unavailable) is left out and named, in the
output and in the JSON's "missing".
"""

from __future__ import annotations

from . import crossover, overhead, train

#: subcommands of `ndlite bench`
BENCHMARKS = [crossover, overhead, train]


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks on this machine: crossover, overhead, train",
                       description=__doc__.split("\n\n")[0])
    inner = p.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    for module in BENCHMARKS:
        module.add_parser(inner)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])
