"""Per-op cost of ndlite on the NumPy backend, robust to a busy machine: for each op, the
minimum over 25 repeats of 2000 calls (microseconds), printed as one JSON line. To compare two
checkouts, run it alternately with each on PYTHONPATH:

    for i in 1 2 3; do for tree in OLD NEW; do
        OPENBLAS_NUM_THREADS=1 PYTHONPATH=$tree:$tree/backends python bench/op_overhead_min.py
    done; done
"""
import json
import timeit

import ndlite

a, b, m = ndlite.ones(8), ndlite.full((8,), 2.0), ndlite.ones(8, 8)
ag, mg = ndlite.ones(8, requires_grad=True), ndlite.ones(8, 8, requires_grad=True)
ops = {"add": lambda: a + b, "mul": lambda: a * b, "add scalar": lambda: a + 1.0,
       "exp": lambda: a.exp(), "relu": lambda: a.relu(), "sum": lambda: a.sum(),
       "reshape": lambda: a.reshape(2, 4), "slice": lambda: a[1:5], "matmul": lambda: m @ m,
       "add+grad": lambda: ag + b, "exp+grad": lambda: ag.exp(), "matmul+grad": lambda: mg @ m,
       "backward": lambda: (ag * 2).sum().backward()}
out = {k: min(timeit.repeat(f, number=2000, repeat=25)) / 2000 * 1e6
       for k, f in ops.items()}
print(json.dumps(out))
