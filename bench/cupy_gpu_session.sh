#!/usr/bin/env bash
# One GPU session for the CuPy backend, in the order that gets the most out of a short lease:
# the fast-path and CUDA-graph tests, the training benchmarks (epoch time, conv layers, peak
# memory; bench/cupy_train.py), 10 epochs of MNIST for the accuracy, then every suite on cupy.
# Logs and JSON go to $OUT (at most 8 files: the lease's limit).
#
#   OUT=/tmp/cupy-session DATA=.carry/mnist bash bench/cupy_gpu_session.sh
#
# Needs a CUDA machine with cupy, torch, pytest, hypothesis and pytest-xdist. A kernel cache
# from an earlier session (.carry/cupy_kernel_cache.tgz) saves NVRTC compiling everything anew.
set -u
OUT=${OUT:-cupy-session}
DATA=${DATA:-.carry/mnist}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/backends PYTHONUNBUFFERED=1 CI=1
export CUPY_CACHE_DIR=$HOME/.cupy/kernel_cache
if [ -f .carry/cupy_kernel_cache.tgz ]; then
  mkdir -p "$HOME/.cupy" && tar xzf .carry/cupy_kernel_cache.tgz -C "$HOME/.cupy"
fi
PYTEST="python3 -m pytest -p ndlite.testing.plugin -p no:cacheprovider -q -ra"
LOG="$OUT/log"

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -m pip list 2>/dev/null | grep -i -E "^(cupy|torch|numpy|hypothesis|pytest) "
} 2>&1 | tee "$LOG"

step() { echo "=== $1" | tee -a "$LOG"; }

step "fast paths and CUDA graphs"
timeout 240 $PYTEST tests/backends/test_cupy_nn.py tests/backends/test_cuda_graph.py 2>&1 \
  | tee -a "$LOG"
step "(a) epoch time"
timeout 150 python3 bench/cupy_train.py epochs --data-dir "$DATA" \
  --json "$OUT/cupy_train_epochs.json" 2>&1 | tail -25 | tee -a "$LOG"
step "(b) conv layers"
timeout 60 python3 bench/cupy_train.py conv --json "$OUT/cupy_conv.json" 2>&1 | tee -a "$LOG"
step "(c) memory"
for side in eager graph torch; do
  timeout 60 python3 bench/cupy_train.py memory --side $side --data-dir "$DATA" \
    --json "$OUT/mem_$side.json" 2>&1 | tail -3 | tee -a "$LOG"
done
python3 - "$OUT" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
sides = {}
for side in ("eager", "graph", "torch"):
    f = out / f"mem_{side}.json"
    if f.exists():
        sides[side] = json.loads(f.read_text())
        f.unlink()
if "torch" in sides:
    t = sides["torch"]
    for side in ("eager", "graph"):
        if side in sides:
            s = sides[side]
            s["ratio_peak_in_use_vs_torch_allocated"] = s["peak_in_use"] / t["peak_in_use"]
            s["ratio_reserved_vs_torch_reserved"] = s["reserved"] / t["reserved"]
(out / "cupy_memory.json").write_text(json.dumps(sides, indent=2))
print(json.dumps({k: {n: v for n, v in s.items() if n != "machine"} for k, s in sides.items()}, indent=1))
EOF
step "(d) accuracy: 10 epochs, CUDA graph"
timeout 240 python3 -m ndlite train mnist --backend cupy --graph --data-dir "$DATA" --epochs 10 \
  --optimizer adam --lr 1e-3 --lr-schedule cosine --no-progress \
  --json "$OUT/cupy_train_mnist.json" 2>&1 | tee -a "$LOG"
step "(e) suites on cupy"
timeout 90 $PYTEST -n 8 tests/backends/test_cupy.py tests/backends/test_cupy_indexing.py 2>&1 | tail -15 | tee -a "$LOG"
timeout 200 $PYTEST -n 8 --pyargs ndlite.testing.suite --ndlite-backend cupy 2>&1 | tail -15 \
  | tee -a "$LOG"
timeout 200 $PYTEST -n 8 tests/conformance tests/nn tests/optim --ndlite-backend cupy \
  -m "not slow" 2>&1 | tail -25 | tee -a "$LOG"
# CuPy's compiled kernels, so that a later session starts warm
tar czf "$OUT/cupy_kernel_cache.tgz" -C "$HOME/.cupy" kernel_cache 2>/dev/null || true
