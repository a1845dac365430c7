"""A job in which rank 1 fails while rank 0 works on (sleeps, or waits in a collective).

    fail.py raise | exit3 | kill | collective
"""

import os
import signal
import sys
import time

how = sys.argv[1]
if how == "collective":
    import ndlite.distributed as dist

    dist.init_process_group("mpi")  # under a bare mpiexec too: then RANK is not set
    rank = dist.get_rank()
    dist.barrier()
    if rank == 1:
        raise ValueError("boom in rank 1 after a barrier")
    dist.barrier()  # rank 0 waits here for a rank that is gone
elif int(os.environ["RANK"]) == 1:
    time.sleep(1.0)
    if how == "raise":
        raise ValueError("boom in rank 1")
    if how == "exit3":
        sys.exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
time.sleep(120)  # rank 0: only the launcher can end this in time
