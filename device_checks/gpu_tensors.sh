#!/usr/bin/env bash
# Device check: GPU tensors through the backend SDK (Tensor.from_dlpack on CUDA memory, served by copy).
# Run on a machine with a CUDA device, from a clean checkout:  bash device_checks/gpu_tensors.sh
# It installs naiad, the python and pytorch plugins (PyPI's default torch wheel carries CUDA) into a
# fresh virtual environment, prints the device, then runs the CUDA tests, which must pass, not skip.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${NAIAD_DEVICE_VENV:-/tmp/naiad-device-venv}
python3 -m venv "$venv"
"$venv/bin/pip" install -q -e . -e plugins/python -e 'plugins/pytorch[test]' 'tritonclient[http,grpc]>=2.51' pytest pytest-timeout
"$venv/bin/python" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible'; print('device:', torch.cuda.get_device_name(0), 'torch', torch.__version__)"
"$venv/bin/python" -m pytest -p no:cacheprovider -rA -o addopts="--import-mode=importlib" \
  plugins/pytorch/tests/test_dlpack.py plugins/pytorch/tests/test_gpu.py
