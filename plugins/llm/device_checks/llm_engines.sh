#!/usr/bin/env bash
# Device check: naiad-llm's GPU engines on a CUDA machine with PyPI and Hugging Face Hub access.
# From a clean checkout:  bash plugins/llm/device_checks/llm_engines.sh
#
# 1. vLLM, in a fresh virtual environment with naiad and naiad-llm[vllm,test]: the GPU engine tests
#    (they must pass, not skip), then llm_engines.py: greedy text served by naiad (backend "vllm",
#    a Triton-style repository) equals vLLM's own LLM.generate, gRPC streaming, and 16 streaming
#    clients against naiad and against `vllm serve` on the same model.
# 2. TensorRT-LLM, in a second environment (its torch pins differ from vLLM's): its GPU engine tests,
#    or a SKIP line when naiad-llm[tensorrt_llm] does not install here.
#
# NAIAD_LLM_GPU_MODEL picks the model (default Qwen/Qwen2.5-0.5B-Instruct). Prints PASS/FAIL lines;
# exits non-zero after any FAIL.
set -uo pipefail
cd "$(dirname "$0")/../../.."
model=${NAIAD_LLM_GPU_MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
base=${NAIAD_DEVICE_VENV:-/tmp/naiad-llm-device}
tests=plugins/llm/tests/test_gpu_engines.py
status=0

step() {  # step NAME COMMAND...: run it, print PASS or FAIL
  if "${@:2}"; then echo "PASS $1"; else echo "FAIL $1"; status=1; fi
}

python3 -m venv "$base-vllm"
step "install naiad-llm[vllm]" "$base-vllm/bin/pip" install -q -e . -e 'plugins/llm[vllm,test]'
step "vLLM engine tests (GPU)" env NAIAD_LLM_GPU_MODEL="$model" "$base-vllm/bin/python" -m pytest \
  -p no:cacheprovider -rA -o addopts="--import-mode=importlib" "$tests" -k "not tensorrt_llm"
"$base-vllm/bin/python" plugins/llm/device_checks/llm_engines.py check --model "$model" || status=1

python3 -m venv "$base-trtllm"
if "$base-trtllm/bin/pip" install -q -e . -e 'plugins/llm[tensorrt_llm,test]'; then
  echo "PASS install naiad-llm[tensorrt_llm]"
  step "TensorRT-LLM engine tests (GPU)" env NAIAD_LLM_GPU_MODEL="$model" "$base-trtllm/bin/python" -m pytest \
    -p no:cacheprovider -rA -o addopts="--import-mode=importlib" "$tests" -k "not vllm"
else
  echo "SKIP TensorRT-LLM: naiad-llm[tensorrt_llm] did not install here (it needs its CUDA and MPI libraries)"
fi
exit $status
