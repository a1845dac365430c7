#!/usr/bin/env bash
# One GPU session for the CuPy backend: the benchmark first (on a quiet GPU), then the CuPy
# backend's own tests, tests/core with NDLITE_BACKEND=cupy, and every suite that takes the
# `backend` fixture (conformance, nn, optim) on cupy. Logs and JSON go to $OUT.
#
#   OUT=/tmp/cupy-session bash bench/cupy_gpu_session.sh
#
# Needs a CUDA machine with cupy, pytest, hypothesis and pytest-xdist (torch optional).
set -u
OUT=${OUT:-cupy-session}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/backends PYTHONUNBUFFERED=1 CI=1
PYTEST="python3 -m pytest -p ndlite.testing.plugin -p no:cacheprovider -q -ra"

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -m pip list 2>/dev/null | grep -i -E "^(cupy|torch|numpy|hypothesis|pytest) "
} | tee "$OUT/machine.txt"

timeout 120 python3 bench/cupy_vs_raw.py --json "$OUT/cupy_vs_raw.json" 2>&1 | tee "$OUT/bench.log"
timeout 90 $PYTEST tests/backends/test_cupy.py 2>&1 | tee "$OUT/test_cupy.log"
NDLITE_BACKEND=cupy timeout 100 $PYTEST -n 8 tests/core 2>&1 | tee "$OUT/test_core.log"
timeout 180 $PYTEST -n 8 tests --ndlite-backend cupy -m "not slow" \
    --ignore=tests/core --ignore=tests/backends 2>&1 | tee "$OUT/test_suites.log"
# CuPy's compiled kernels, so a later session can start warm (CUPY_CACHE_DIR)
tar czf "$OUT/cupy_kernel_cache.tgz" -C "$HOME/.cupy" kernel_cache 2>/dev/null || true
