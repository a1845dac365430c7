"""The launcher: start the ranks of a data-parallel job, watch them, stop them all when one
fails, and say which one failed and why (torchrun's job, for ndlite's engines).

    python -m ndlite.distributed.run --nproc-per-node 2 train.py --epochs 3
    ndlite run --nproc-per-node 2 -m ndlite train mnist            # a module, as python -m

Each rank is a new Python process (never a fork of this one) running
`python -m ndlite.distributed.worker SCRIPT ARGS`, with this environment plus torchrun's
variables RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. How the
processes are started depends on the engine they will use:

- under `mpiexec` (the one beside this Python, as the MPICH wheel installs it, else on PATH)
  when the ranks will use MPI: only an MPI launcher can make separate processes one MPI
  world. `--engine auto` (the default) does this when mpi4py is installed and
  NDLITE_BACKEND is not CuPy;
- as plain subprocesses otherwise (`--engine nccl`): NCCL ranks meet through rank 0's TCP
  store on MASTER_ADDR:MASTER_PORT. This is also how several hosts run one job: the same
  command on each, with --nnodes, --node-rank and the first host's --master-addr.

The launcher polls every rank (the exit status of its own children; under mpiexec, the
reports the worker writes and whether each rank's process still exists). When one fails it
prints the rank, the exit code or signal and the reason, sends SIGTERM to the others, and
SIGKILL after --grace seconds; its own exit code is the failed rank's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PROG = "ndlite run"
#: seconds between two looks at the ranks
POLL = 0.05
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1,
                        metavar="N", help="ranks to start on this host (default 1)")
    parser.add_argument("--nnodes", type=int, default=1,
                        help="hosts in the job (NCCL only; run the same command on each)")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0,
                        help="this host's number, 0 to nnodes - 1")
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                        help="address of the host of rank 0 (default 127.0.0.1)")
    parser.add_argument("--master-port", "--master_port", type=int, default=None,
                        help="port of rank 0's rendezvous store (default: a free one; needed "
                             "with --nnodes > 1)")
    parser.add_argument("--engine", choices=["auto", "mpi", "nccl"], default="auto",
                        help="mpi: start the ranks under mpiexec (an MPI world); nccl: as plain "
                             "subprocesses; auto: mpi when mpi4py is installed and "
                             "NDLITE_BACKEND is not cupy")
    parser.add_argument("--grace", type=float, default=5.0, metavar="SECONDS",
                        help="after a failure, seconds between SIGTERM and SIGKILL (default 5)")
    parser.add_argument("-m", "--module", action="store_true",
                        help="the target is a module, run as python -m MODULE")
    parser.add_argument("script", help="the script (or, with -m, the module) each rank runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="arguments passed to the script")


class LaunchError(Exception):
    """A job that cannot start (bad arguments, no mpiexec): one line for the user."""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def mpiexec_command(nproc: int) -> list[str]:
    """`mpiexec -n NPROC` of mpi4py's MPI, with the flags Open MPI needs here."""
    from .group import is_mpi_available
    from .mpi import INSTALL, mpiexec

    path = mpiexec()
    if not is_mpi_available() or path is None:
        raise LaunchError(f"--engine mpi needs mpi4py and an mpiexec: {INSTALL}")
    flags = []
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    if "Open MPI" in version or "OpenRTE" in version:
        flags.append("--oversubscribe")  # more ranks than cores is the user's call
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--allow-run-as-root")
    return [path, *flags, "-n", str(nproc)]


def choose_engine(engine: str, nnodes: int) -> str:
    """How the ranks start: "mpi" (under mpiexec) or "nccl" (plain subprocesses)."""
    from .group import is_mpi_available
    from .mpi import mpiexec

    if engine == "auto":
        cupy = os.environ.get("NDLITE_BACKEND", "").startswith("cupy")
        mpi = is_mpi_available() and mpiexec() is not None
        engine = "mpi" if mpi and not cupy and nnodes == 1 else "nccl"
    if engine == "mpi" and nnodes > 1:
        raise LaunchError("--nnodes > 1 with the mpi engine: start the job with mpiexec and a "
                          "host file instead (docs/distributed.md)")
    return engine


class Launch:
    """One job: the ranks of this host, started, watched, and stopped together."""

    def __init__(self, target: list[str], nproc: int, *, engine: str = "auto",
                 nnodes: int = 1, node_rank: int = 0, master_addr: str = "127.0.0.1",
                 master_port: int | None = None, grace: float = 5.0, env: dict | None = None):
        if nproc < 1:
            raise LaunchError(f"--nproc-per-node must be at least 1, got {nproc}")
        if nnodes < 1 or not 0 <= node_rank < nnodes:
            raise LaunchError(f"--node-rank {node_rank} is not in 0..{nnodes - 1}")
        if nnodes > 1 and master_port is None:
            raise LaunchError("--master-port is needed with --nnodes > 1 (the same on every "
                              "host)")
        self.nproc, self.nnodes, self.node_rank, self.grace = nproc, nnodes, node_rank, grace
        self.engine = choose_engine(engine, nnodes)
        self.world = nproc * nnodes
        self.run_dir = tempfile.mkdtemp(prefix="ndlite-run-")
        self.env = dict(os.environ if env is None else env)
        self.env.update(MASTER_ADDR=master_addr,
                        MASTER_PORT=str(master_port or _free_port(master_addr)),
                        WORLD_SIZE=str(self.world), LOCAL_WORLD_SIZE=str(nproc),
                        GROUP_RANK=str(node_rank), NDLITE_RUN_DIR=self.run_dir)
        if nproc > 1 and not any(v in self.env for v in THREAD_VARIABLES):
            threads = max(1, (os.cpu_count() or 1) // nproc)
            self.env["OMP_NUM_THREADS"] = str(threads)
            print(f"{PROG}: OMP_NUM_THREADS={threads} for each of {nproc} ranks (set it to "
                  "choose)", file=sys.stderr)
        self.worker = [sys.executable, "-m", "ndlite.distributed.worker", *target]
        self.procs: dict[int, subprocess.Popen] = {}  # rank -> process (plain subprocesses)
        self.mpiexec: subprocess.Popen | None = None

    # ---- starting -----------------------------------------------------------------------------

    def start(self) -> None:
        if self.engine == "mpi":
            env = {k: v for k, v in self.env.items() if k not in ("RANK", "LOCAL_RANK")}
            self.mpiexec = subprocess.Popen(mpiexec_command(self.nproc) + self.worker, env=env,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
            return
        for local in range(self.nproc):
            rank = self.node_rank * self.nproc + local
            env = dict(self.env, RANK=str(rank), LOCAL_RANK=str(local))
            self.procs[rank] = subprocess.Popen(self.worker, env=env, stdin=subprocess.DEVNULL,
                                                start_new_session=True)

    # ---- watching -----------------------------------------------------------------------------

    def _reports(self, kind: str) -> dict[int, dict]:
        found = {}
        for name in os.listdir(self.run_dir):
            if name.startswith("rank-") and name.endswith("." + kind):
                try:
                    with open(os.path.join(self.run_dir, name)) as f:
                        entry = json.load(f)
                except (OSError, ValueError):
                    continue  # being written
                found[int(entry["rank"])] = entry
        return found

    def _reason(self, rank: int, code: int) -> str:
        entry = self._reports("exit").get(rank)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        reason = entry.get("reason") if entry else ""
        return f"exit code {code}" + (f": {reason}" if reason else "")

    def _poll_subprocesses(self):
        """(failed rank, exit code) or None; "done" when every rank exited with 0."""
        codes = {rank: p.poll() for rank, p in self.procs.items()}
        for rank, code in sorted(codes.items()):
            if code not in (None, 0):
                return rank, code
        return "done" if all(code == 0 for code in codes.values()) else None

    def _poll_mpiexec(self):
        # liveness first, then reports: a rank that reported and left is not "killed"
        gone = {rank: entry for rank, entry in self._reports("pid").items()
                if not _alive(entry["pid"])}
        exits = self._reports("exit")
        for rank, entry in sorted(exits.items()):
            if entry["code"] != 0:
                return rank, entry["code"]
        silent = sorted(rank for rank in gone if rank not in exits)
        if silent:
            return silent, None  # died without a report: a signal or os._exit
        code = self.mpiexec.poll()
        if code is None:
            return None
        if code == 0 and len(exits) == self.nproc:
            return "done"
        return "mpiexec", code

    def wait(self) -> int:
        """Watch until every rank succeeded (0) or one failed (its exit code)."""
        poll = self._poll_mpiexec if self.engine == "mpi" else self._poll_subprocesses
        while True:
            outcome = poll()
            if outcome == "done":
                return 0
            if outcome is not None:
                return self._fail(*outcome)
            time.sleep(POLL)

    def _fail(self, rank, code) -> int:
        if rank == "mpiexec":
            message = (f"mpiexec exited with code {code} before every rank reported (its "
                       "message is above)")
        elif code is None:
            message = (f"rank {rank[0]} died without a report: killed by a signal (mpiexec "
                       "says which above) or os._exit" if len(rank) == 1 else
                       f"ranks {', '.join(map(str, rank))} died without a report: one was "
                       "killed by a signal and mpiexec stopped the others (its message above "
                       "names the first), or they called os._exit")
        else:
            message = f"rank {rank} failed: {self._reason(rank, code)}"
        print(f"{PROG}: {message}", file=sys.stderr, flush=True)
        stopped = self.stop()
        if stopped:
            print(f"{PROG}: stopped rank{'s' if len(stopped) > 1 else ''} "
                  f"{', '.join(map(str, stopped))}", file=sys.stderr, flush=True)
        if code is None:
            return 1
        return 128 - code if code < 0 else (code if 0 < code < 256 else 1)

    # ---- stopping -----------------------------------------------------------------------------

    def _live_ranks(self) -> dict[int, int]:
        """rank -> pid of every rank process still running."""
        if self.engine != "mpi":
            return {rank: p.pid for rank, p in self.procs.items() if p.poll() is None}
        done = self._reports("exit")
        return {rank: entry["pid"] for rank, entry in self._reports("pid").items()
                if rank not in done and _alive(entry["pid"])}

    def _signal(self, sig) -> None:
        if self.engine == "mpi":
            if self.mpiexec.poll() is None:
                _killpg(self.mpiexec.pid, sig)
            for pid in self._live_ranks().values():
                _kill(pid, sig)
        else:
            for p in self.procs.values():
                if p.poll() is None:
                    _killpg(p.pid, sig)

    def stop(self) -> list[int]:
        """SIGTERM every rank still running, SIGKILL after the grace period; returns them."""
        if self.engine == "mpi":  # a rank may not have written its pid yet: mpiexec has it
            done, pids = self._reports("exit"), self._reports("pid")
            live = [rank for rank in range(self.nproc) if rank not in done
                    and (rank not in pids or _alive(pids[rank]["pid"]))]
        else:
            live = sorted(self._live_ranks())
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and (self._live_ranks() or self._starter_running()):
            time.sleep(POLL)
        if self._live_ranks() or self._starter_running():
            self._signal(signal.SIGKILL)
        for p in [*self.procs.values(), self.mpiexec]:
            if p is not None:
                try:
                    p.wait(timeout=self.grace + 5)
                except subprocess.TimeoutExpired:
                    pass
        return live

    def _starter_running(self) -> bool:
        return self.mpiexec is not None and self.mpiexec.poll() is None

    def close(self) -> None:
        shutil.rmtree(self.run_dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _killpg(pid: int, sig) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Stopped(Exception):
    def __init__(self, signum: int):
        self.signum = signum


def launch(target: list[str], nproc: int, **options) -> int:
    """Run `target` ([-m] script-or-module, args...) as `nproc` ranks; returns the exit code
    (0, or the first failed rank's). SIGINT or SIGTERM to the launcher stops every rank."""
    job = Launch(target, nproc, **options)

    def stopped(signum, frame):
        raise _Stopped(signum)

    previous = {s: signal.signal(s, stopped) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        job.start()
        return job.wait()
    except _Stopped as exc:
        name = signal.Signals(exc.signum).name
        print(f"{PROG}: {name}: stopping every rank", file=sys.stderr, flush=True)
        job.stop()
        return 128 + exc.signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        job.close()


def run_from_args(args) -> int:
    target = (["-m"] if args.module else []) + [args.script, *args.script_args]
    try:
        return launch(target, args.nproc_per_node, engine=args.engine, nnodes=args.nnodes,
                      node_rank=args.node_rank, master_addr=args.master_addr,
                      master_port=args.master_port, grace=args.grace)
    except LaunchError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ndlite.distributed.run",
                                     description="Start the ranks of a data-parallel job.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
