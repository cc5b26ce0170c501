"""A repository with TensorRT plans on this machine: the plans fail to load with the reason, every other model serves.

On a machine without a CUDA device (CI) the reason is the missing GPU; with a GPU the junk plan
fails for what is missing there (TensorRT) or because TensorRT cannot deserialize it.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.backend import gpu_count
from naiad.testing import ServerProcess, start_server

IDENTITY = """
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
# The three ways a Triton repository names a TensorRT model.
PLANS = {
    "by_platform": 'platform: "tensorrt_plan"\nmax_batch_size: 8',
    "by_backend": 'backend: "tensorrt"',
    "by_file": None,  # no config.pbtxt: the model.plan file names the backend
}


def _expected_reason(model: str) -> str:
    if gpu_count() == 0:
        return (
            f"model '{model}': no GPU found (no CUDA device is visible to this process); TensorRT plans need one,"
            " so '1/model.plan' cannot load here"
        )
    if importlib.util.find_spec("tensorrt") is None:
        return "needs TensorRT's Python package, which is not installed"
    return "could not deserialize"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("plans") / "models"
    for name, config in PLANS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.plan").write_bytes(b"not a TensorRT plan")
        if config is not None:
            (repo / name / "config.pbtxt").write_text(config)
    (repo / "identity" / "1").mkdir(parents=True)
    (repo / "identity" / "config.pbtxt").write_text(IDENTITY)
    process = start_server([repo])
    yield process
    process.stop()


def test_the_other_model_serves_over_http_and_grpc(server: ServerProcess) -> None:
    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    http = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT0", [2, 4], "FP32")
    tensor.set_data_from_numpy(data)
    np.testing.assert_array_equal(http.infer("identity", [tensor]).as_numpy("OUTPUT0"), data)
    http.close()
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    grpc_tensor = grpcclient.InferInput("INPUT0", [2, 4], "FP32")
    grpc_tensor.set_data_from_numpy(data)
    np.testing.assert_array_equal(grpc.infer("identity", [grpc_tensor]).as_numpy("OUTPUT0"), data)
    grpc.close()


@pytest.mark.parametrize("model", sorted(PLANS))
def test_a_plan_is_unavailable_with_the_reason(server: ServerProcess, model: str) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready(model)
    index = {entry["name"]: entry for entry in client.get_model_repository_index()}
    client.close()
    assert index[model]["state"] == "UNAVAILABLE"
    assert _expected_reason(model) in index[model]["reason"]
    failures = [line for line in server.logs().splitlines() if f"model '{model}' version 1 failed to load" in line]
    assert failures, server.logs()
    assert _expected_reason(model) in failures[0]


def test_the_reason_says_what_to_do(server: ServerProcess) -> None:
    with contextlib.closing(httpclient.InferenceServerClient(server.http_url)) as client:
        reason = client.get_model_repository_index()
    text = next(entry["reason"] for entry in reason if entry["name"] == "by_platform")
    if gpu_count() == 0:
        assert (
            "Serve this model on a machine with an NVIDIA GPU and driver (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
            in (text)
        )
    else:
        assert "pip install 'naiad-tensorrt[gpu]'" in text or "rebuild it on this machine" in text
