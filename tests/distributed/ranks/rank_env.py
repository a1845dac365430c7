"""Print this rank's view of the launch as one JSON line (a script, and a module: -m)."""

import json
import os
import sys

NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
         "NDLITE_TEST_MARK", "OMP_NUM_THREADS")
line = "ENV " + json.dumps({name: os.environ.get(name) for name in NAMES}) + "\n"
sys.stdout.write(line)  # one write: the ranks share the launcher's stdout
