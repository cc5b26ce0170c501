#!/usr/bin/env bash
# Device check: naiad-tensorrt on a machine with an NVIDIA GPU.
# From the repository root after `make setup`:  bash plugins/tensorrt/device_checks/tensorrt.sh
#
# Installs the plugin's `gpu` extra (TensorRT 10, cuda-python) and naiad's `cuda` extra into .venv,
# prints the device, runs the GPU tests (they must pass, not skip), then tensorrt_check.py: builds a
# plan from the onnxruntime plugin's example ONNX model with two profiles, serves it, compares HTTP
# and gRPC results with onnxruntime's, checks CUDA graphs, and measures served over in-process
# throughput. Prints PASS/FAIL lines; exits non-zero after any FAIL.
set -uo pipefail
cd "$(dirname "$0")/../../.."
bin=${NAIAD_VENV:-.venv}/bin
status=0

step() {  # step NAME COMMAND...: run it, print PASS or FAIL
  if "${@:2}"; then echo "PASS $1"; else echo "FAIL $1"; status=1; fi
}

test -x "$bin/python" || { echo "FAIL no $bin/python: run make setup first"; exit 1; }
step "install naiad-tensorrt[gpu] and naiad[cuda]" "$bin/pip" install -q -e '.[cuda]' -e 'plugins/tensorrt[gpu,test]'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "INFO nvidia-smi not found"
step "TensorRT and cuda-python import and see the GPU" "$bin/python" -c "
import tensorrt
from cuda.bindings import runtime
error, count = runtime.cudaGetDeviceCount()
assert error == runtime.cudaError_t.cudaSuccess and count > 0, (error, count)
print('INFO TensorRT', tensorrt.__version__, 'CUDA devices', count)"
step "GPU tests (plugins/tensorrt/tests/test_gpu.py)" "$bin/python" -m pytest -p no:cacheprovider -rA \
  -o addopts="--import-mode=importlib" plugins/tensorrt/tests/test_gpu.py
step "build, serve, compare, graphs and throughput (tensorrt_check.py)" "$bin/python" plugins/tensorrt/device_checks/tensorrt_check.py
exit $status
