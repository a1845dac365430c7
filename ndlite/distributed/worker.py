"""One rank of a job started by `ndlite run`: runs the script (or module) as __main__ and
tells the launcher how it ended.

    python -m ndlite.distributed.worker [-m] SCRIPT_OR_MODULE [ARGS...]

Under mpiexec it first sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the MPI
launcher's own variables, so a script reads the same variables however it was started. In
NDLITE_RUN_DIR (made by the launcher) it writes `rank-R.pid` when it starts and `rank-R.exit`
(exit code and reason: the exception, or sys.exit's message) when it ends. A rank that
fails leaves at once with os._exit, so that it does not wait in MPI_Finalize for ranks that
are still computing: the launcher stops those.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback

from .mpi import launched_rank


def rank_environment() -> str:
    """Fill in torchrun's variables from an MPI launcher's; returns this rank's RANK."""
    layout = launched_rank()
    if "RANK" not in os.environ and layout is not None:
        rank, world, local, local_world = layout
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local),
                          LOCAL_WORLD_SIZE=str(local_world))
    return os.environ.get("RANK", "0")


def report(rank: str, kind: str, **fields) -> None:
    """Write rank-RANK.KIND into the launcher's run folder (atomically: the launcher polls)."""
    folder = os.environ.get("NDLITE_RUN_DIR")
    if not folder or not os.path.isdir(folder):
        return
    path = os.path.join(folder, f"rank-{rank}.{kind}")
    with open(path + ".tmp", "w") as f:
        json.dump({"rank": int(rank), "pid": os.getpid(), **fields}, f)
    os.replace(path + ".tmp", path)


def _exit_status(code) -> tuple[int, str]:
    """sys.exit's argument as (exit code, reason), as the interpreter would treat it."""
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, f"sys.exit({code})" if code else ""
    print(code, file=sys.stderr)
    return 1, str(code)


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    line = text.splitlines()[0] if text else text
    return line if len(line) <= 300 else line[:297] + "..."


def _user_frames(tb):
    """The traceback from the script's first frame on (not this module's or runpy's)."""
    while tb is not None and tb.tb_next is not None and (
            tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__)
            or "runpy" in tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def run(target: str, args: list[str], module: bool) -> int:
    rank = rank_environment()
    report(rank, "pid")
    code, reason = 0, ""
    try:
        if module:
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code, reason = _exit_status(exc.code)
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt too: report, then leave
        traceback.print_exception(type(exc), exc, _user_frames(exc.__traceback__))
        code, reason = 1, _one_line(exc)
    report(rank, "exit", code=code, reason=reason)
    if code != 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if 0 < code < 256 else 1)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    module = bool(argv) and argv[0] in ("-m", "--module")
    if module:
        argv = argv[1:]
    if not argv:
        print("usage: python -m ndlite.distributed.worker [-m] SCRIPT_OR_MODULE [ARGS...]",
              file=sys.stderr)
        return 2
    return run(argv[0], argv[1:], module)


if __name__ == "__main__":
    sys.exit(main())
