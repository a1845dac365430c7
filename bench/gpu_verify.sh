#!/usr/bin/env bash
# One call on the GPU machine: the whole test suite with the CuPy and NVIDIA OpenCL backends
# available, then the CPU/GPU crossover benchmark. Needs pyopencl wheels in .whl (carried).
#   OUT=/some/dir bash bench/gpu_verify.sh
set -o pipefail
OUT=${OUT:-/tmp/verify}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD CI=true
# NVIDIA's OpenCL driver is installed but not registered on this image
mkdir -p /tmp/icd && echo libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -m ndlite info | tee "$OUT/info.txt"
timeout 480 python3 -m pytest tests -q -p no:cacheprovider -ra 2>&1 | tail -40 | tee "$OUT/tests.txt"
timeout 100 python3 bench/crossover.py --budget 0.6 --out crossover_gpu 2>&1 | tee "$OUT/crossover.txt"
cp bench/results/crossover_gpu.json "$OUT/" 2>/dev/null
