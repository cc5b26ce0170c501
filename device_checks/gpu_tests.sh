#!/usr/bin/env bash
# Device check: every GPU test that runs in an environment already holding naiad, its plugins and
# their test requirements, on a machine that cannot reach a package index (the other device checks
# install from PyPI). From the repository root:  PYTHON=python3 bash device_checks/gpu_tests.sh
#
# Prints the device, then one PASS/FAIL line per group: CUDA shared memory over HTTP and gRPC,
# GPU tensors through the pytorch plugin, the transformers LLM engine on CUDA (engine and served
# text against transformers' own greedy generate), and onnxruntime's CUDA provider when the
# installed onnxruntime has it (a SKIP line says when not). Exits non-zero after any FAIL.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
status=0
pytest=("$python" -m pytest -p no:cacheprovider -rA -o addopts="--import-mode=importlib")

step() {  # step NAME COMMAND...: run it, print PASS or FAIL
  if "${@:2}"; then echo "PASS $1"; else echo "FAIL $1"; status=1; fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "INFO nvidia-smi not found"
step "CUDA visible to torch and to naiad's CUDA runtime" "$python" -c "
import torch
from naiad.shared_memory.cuda import CudaRuntime
runtime, why = CudaRuntime.probe()
assert torch.cuda.is_available(), 'torch sees no CUDA device'
assert runtime, why
print('INFO', torch.cuda.get_device_name(0), 'torch', torch.__version__)"
step "CUDA shared memory (tests/shared_memory)" "${pytest[@]}" \
  tests/shared_memory/test_cuda_gpu.py tests/shared_memory/test_system_grpc.py
step "GPU tensors and KIND_GPU (plugins/pytorch)" "${pytest[@]}" \
  plugins/pytorch/tests/test_dlpack.py plugins/pytorch/tests/test_gpu.py
step "transformers LLM engine on CUDA (plugins/llm)" "${pytest[@]}" \
  plugins/llm/tests/test_gpu_serving.py plugins/llm/tests/test_gpu_engines.py -k "gpu_serving or transformers"
if "$python" -c "import onnxruntime, sys; sys.exit('CUDAExecutionProvider' not in onnxruntime.get_available_providers())"; then
  step "onnxruntime on CUDA (plugins/onnxruntime)" "${pytest[@]}" plugins/onnxruntime/tests/test_gpu.py
else
  echo "SKIP onnxruntime on CUDA: the installed onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)"
fi
exit $status
