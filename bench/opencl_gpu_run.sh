#!/bin/bash
# One call on the lent GPU machine (see docs/opencl.md): registers NVIDIA's OpenCL ICD, prints
# `ndlite info`, times SGEMM 4096^3, the small/bandwidth ops, the seed CNN's convolutions (with
# a sweep of tile sizes) and its training epoch against CuPy/cuBLAS/cuDNN/PyTorch, trains it a
# few epochs on OpenCL and on CuPy with the same command (test accuracy per epoch), then runs
# the OpenCL tests and the conformance suite on the NVIDIA device. Needs the pyopencl wheels in
# .whl/ and full MNIST in .carry/mnist (both carried) and $OUT; everything it prints also goes
# to $OUT/log.      bash bench/opencl_gpu_run.sh [EPOCHS] [PARTS]
#   PARTS: any of sgemm ops conv train accuracy tests (default: all of them)
set -o pipefail
epochs=${1:-3}
parts=${2:-"sgemm ops conv train accuracy tests"}
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
has() { [[ " $parts " == *" $1 "* ]]; }
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -m ndlite info
    git log -1 --format='commit %h %s' 2>/dev/null
    if has sgemm; then
        echo "== SGEMM"
        timeout 120 python3 bench/opencl_sgemm.py --size 4096 --repeats 20 \
            --json "$OUT/opencl_sgemm.json"
    fi
    if has ops; then
        echo "== ops"
        timeout 90 python3 bench/opencl_ops.py --json "$OUT/opencl_ops.json"
    fi
    if has conv; then
        echo "== conv"
        timeout 120 python3 bench/opencl_conv.py --json "$OUT/opencl_conv.json"
    fi
    if has train; then
        echo "== training epoch"
        timeout 180 python3 bench/opencl_train.py --data-dir .carry/mnist --host-profile 40 \
            --json "$OUT/opencl_train.json"
    fi
    if has accuracy; then
        echo "== accuracy per epoch: the same command on OpenCL and on CuPy"
        for backend in opencl:gpu cupy; do
            timeout 150 python3 -m ndlite train mnist --backend "$backend" --epochs "$epochs" \
                --data-dir .carry/mnist --no-progress --json "$OUT/train_${backend%%:*}.json"
        done
    fi
    if has tests; then
        echo "== tests"
        NDLITE_BACKEND=opencl timeout 300 python3 -m pytest -q -p no:cacheprovider \
            $plugin --ndlite-backend opencl -o addopts="" -rfE \
            tests/backends/test_opencl.py tests/backends/test_opencl_nn.py \
            tests/nn/test_backends.py --pyargs ndlite.testing.suite
        echo "pytest exit: $?"
    fi
} 2>&1 | tee "$OUT/log"
