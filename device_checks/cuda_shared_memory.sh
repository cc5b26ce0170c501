#!/usr/bin/env bash
# Device check: Triton's CUDA shared-memory extension (register a cudaIpcMemHandle_t made by
# tritonclient.utils.cuda_shared_memory, infer through it over HTTP and gRPC, compare the results).
# Run on a machine with a CUDA device, from a clean checkout:  bash device_checks/cuda_shared_memory.sh
# It installs naiad with cuda-python, the python plugin, torch (PyPI's default wheel carries CUDA) and
# tritonclient into a fresh virtual environment, then onnxruntime-gpu in place of onnxruntime; prints the
# device, then runs the CUDA tests, which must pass, not skip.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${NAIAD_DEVICE_VENV:-/tmp/naiad-device-venv}
python3 -m venv "$venv"
"$venv/bin/pip" install -q -e '.[cuda]' -e plugins/python -e 'plugins/pytorch[test]' -e plugins/onnxruntime torch onnx 'tritonclient[http,grpc]>=2.51' httpx pytest pytest-timeout
"$venv/bin/pip" uninstall -q -y onnxruntime
"$venv/bin/pip" install -q onnxruntime-gpu
"$venv/bin/python" -c "from naiad.shared_memory.cuda import CudaRuntime; runtime, why = CudaRuntime.probe(); assert runtime, why; import torch; print('device:', torch.cuda.get_device_name(0))"
"$venv/bin/python" -m pytest -p no:cacheprovider -rA -o addopts="--import-mode=importlib" \
  tests/shared_memory/test_cuda_gpu.py tests/shared_memory/test_system_grpc.py \
  plugins/pytorch/tests/test_gpu.py::test_inputs_in_cuda_shared_memory_reach_the_model_on_the_device \
  plugins/onnxruntime/tests/test_gpu.py::test_inputs_in_cuda_shared_memory_are_served
