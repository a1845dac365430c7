"""`ndlite run`: start the ranks of a data-parallel job (python -m ndlite.distributed.run).

    ndlite run --nproc-per-node 2 train.py --epochs 3
    ndlite run --nproc-per-node 2 -m mypackage.train
"""

from __future__ import annotations


def add_parser(sub) -> None:
    from ..distributed.run import add_arguments

    p = sub.add_parser("run", help="start N ranks of a script (data-parallel training)",
                       description="Start N ranks of a script with RANK, WORLD_SIZE, "
                                   "LOCAL_RANK, MASTER_ADDR and MASTER_PORT set (under mpiexec "
                                   "when they will use MPI), stop them all if one fails, and "
                                   "say which one and why.")
    add_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ..distributed.run import run_from_args

    return run_from_args(args)
