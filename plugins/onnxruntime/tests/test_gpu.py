"""KIND_GPU instances on ONNX Runtime's CUDA and TensorRT execution providers; these need a CUDA device.

On a GPU host the outcome depends on the ONNX Runtime wheel: onnxruntime-gpu serves the model on
the CUDA EP, the CPU-only onnxruntime fails the load with a reason naming the wheel to install.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from naiad.backend import gpu_count
from naiad.testing import ModelRepositoryBuilder, ServerProcess, infer_through_shared_memory

from . import onnx_models
from .conftest import floats, write_model

pytestmark = pytest.mark.skipif(gpu_count() == 0, reason="needs a CUDA device")

GPU_CONFIG = """
max_batch_size: 8
instance_group [ {{ count: 2 kind: KIND_GPU gpus: [ 0 ] }} ]
{extra}
"""


def _serves_add_sub(server: ServerProcess, model: str) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    a, b = floats(3, 4), floats(3, 4, seed=1)
    tensors = [httpclient.InferInput(name, [3, 4], "FP32") for name in ("INPUT0", "INPUT1")]
    tensors[0].set_data_from_numpy(a)
    tensors[1].set_data_from_numpy(b)
    result = client.infer(model, tensors)
    np.testing.assert_allclose(result.as_numpy("OUTPUT0"), a + b, rtol=1e-6)
    np.testing.assert_allclose(result.as_numpy("OUTPUT1"), a - b, rtol=1e-6)


def _load_failure(server: ServerProcess, model: str) -> str:
    lines = [line for line in server.logs().splitlines() if f"model '{model}' version 1 failed to load" in line]
    assert lines, server.logs()
    return lines[0]


def test_gpu_instances_run_on_cuda(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    write_model(model_repository.root, "on_gpu", onnx_models.add_sub(), GPU_CONFIG.format(extra=""))
    server = naiad_server(model_repository.root)
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        reason = _load_failure(server, "on_gpu")
        assert "instance_group kind KIND_GPU needs ONNX Runtime's CUDAExecutionProvider" in reason
        assert "pip install 'naiad-onnxruntime[gpu]'" in reason
        return
    _serves_add_sub(server, "on_gpu")
    sessions = [line for line in server.logs().splitlines() if "model 'on_gpu': session for instance" in line]
    assert len(sessions) == 2, sessions  # one session per instance, each on CUDA first
    assert all("on CUDAExecutionProvider, CPUExecutionProvider" in line for line in sessions), sessions


def test_tensorrt_accelerator(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    extra = 'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }'
    write_model(model_repository.root, "on_trt", onnx_models.add_sub(), GPU_CONFIG.format(extra=extra))
    server = naiad_server(model_repository.root)
    if not httpclient.InferenceServerClient(server.http_url).is_model_ready("on_trt"):
        # No TensorRT EP in this wheel, or its libraries are missing: the reason says which.
        reason = _load_failure(server, "on_trt")
        assert "TensorrtExecutionProvider" in reason
        assert "could not enable" in reason or "pip install" in reason
        return
    _serves_add_sub(server, "on_trt")
    assert "on TensorrtExecutionProvider, CUDAExecutionProvider, CPUExecutionProvider" in server.logs()


def test_inputs_in_cuda_shared_memory_are_served(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    """Inputs in CUDA shared memory reach a CUDA session through an IOBinding (no host round trip), or
    a CPU session (onnxruntime without the CUDA EP) as host copies; the outputs come back into the
    client's region either way."""
    kind = "KIND_GPU" if "CUDAExecutionProvider" in ort.get_available_providers() else "KIND_CPU"
    write_model(
        model_repository.root, "shm", onnx_models.add_sub(), f"max_batch_size: 8\ninstance_group [ {{ kind: {kind} }} ]"
    )
    server = naiad_server(model_repository.root)
    a, b = floats(2, 4), floats(2, 4, seed=1)
    written = infer_through_shared_memory(server.http_url, "http", "shm", {"INPUT0": a, "INPUT1": b}, cuda_device=0)
    np.testing.assert_allclose(written["OUTPUT0"], a + b, rtol=1e-6)
    np.testing.assert_allclose(written["OUTPUT1"], a - b, rtol=1e-6)
