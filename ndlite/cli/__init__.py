"""The `ndlite` command: one subcommand per module of this package.

    ndlite info                 backends, devices, versions
    ndlite conformance          check backends against the reference, op by op
    ndlite train mnist          train the seed CNN on MNIST
    ndlite bench crossover      benchmarks on this machine (also overhead, train)
    ndlite run ... script.py    start the ranks of a data-parallel job
"""

from __future__ import annotations

import argparse
import sys

from . import bench, conformance, info, run, train

#: subcommand modules; each has `add_parser(subparsers)` and `run(args) -> int`
COMMANDS = [info, conformance, train, bench, run]


def build_parser() -> argparse.ArgumentParser:
    import ndlite

    parser = argparse.ArgumentParser(
        prog="ndlite",
        description="ndlite: a small multi-backend array library with autodiff.",
    )
    parser.add_argument("--version", action="version", version=f"ndlite {ndlite.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
