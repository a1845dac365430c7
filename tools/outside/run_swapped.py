"""Run an outside script with its torch import lines pointed at ndlite:

    python tools/outside/run_swapped.py SCRIPT.py [ARGS...]

as `python SCRIPT.py ARGS...` would (from the script's folder; sibling modules it imports
are swapped too). NDLITE_BACKEND picks the backend; OUTSIDE_WORKAROUNDS=contiguous applies
lockstep.py's stand-in for what ndlite lacks. Prints the lines it changed first.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockstep import apply_workarounds  # noqa: E402
from swap import changed_lines, run_script, swap_source  # noqa: E402

if __name__ == "__main__":
    script = sys.argv[1]
    apply_workarounds([w for w in os.environ.get("OUTSIDE_WORKAROUNDS", "").split(",") if w])
    with open(script, encoding="utf-8") as f:
        print("swapped:", swap_source(f.read())[1], flush=True)
    os.chdir(os.path.dirname(os.path.abspath(script)))
    run_script(os.path.abspath(script), sys.argv[2:], "ndlite")
    print("swapped modules:", sorted(changed_lines), flush=True)
