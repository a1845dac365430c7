#!/bin/bash
# One call on the lent GPU machine (see docs/opencl.md): registers NVIDIA's OpenCL ICD, prints
# `ndlite info`, times SGEMM 4096^3 and the small/bandwidth ops against CuPy, then runs the
# OpenCL tests and the conformance suite on the NVIDIA device. Needs the pyopencl wheels in
# .whl/ (carried) and $OUT; everything it prints also goes to $OUT/log.
#   bash bench/opencl_gpu_run.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:.:backends PYTHONUNBUFFERED=1 CI=1 NDLITE_CACHE_DIR=/tmp/ndlite-cache
mkdir -p /tmp/icd
lib=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1/ {print $NF; exit}')
[ -n "$lib" ] || lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-opencl.so.1' \
    2>/dev/null | head -1)
echo "${lib:-libnvidia-opencl.so.1}" > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd
# the kit's pytest plugin comes from an entry point once ndlite is installed; here it is not
plugin=$(python3 -c "from importlib.metadata import entry_points as e
print('' if any(p.name == 'ndlite' for p in e(group='pytest11')) else '-p ndlite.testing.plugin')")
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -m ndlite info
    echo "== SGEMM"
    timeout 180 python3 bench/opencl_sgemm.py --size 4096 --repeats 20 \
        --json "$OUT/opencl_sgemm.json"
    echo "== ops"
    timeout 90 python3 bench/opencl_ops.py --json "$OUT/opencl_ops.json"
    echo "== tests"
    NDLITE_BACKEND=opencl timeout 330 python3 -m pytest -q -p no:cacheprovider \
        $plugin --ndlite-backend opencl -o addopts="" -rfE \
        tests/backends/test_opencl.py tests/conformance/test_ops.py tests/core
    echo "pytest exit: $?"
} 2>&1 | tee "$OUT/log"
