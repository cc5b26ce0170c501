"""Health, server and model metadata, and model config over HTTP with the real tritonclient."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess


@pytest.fixture
def client(core_server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    with httpclient.InferenceServerClient(core_server.http_url) as client:
        yield client


def test_health(client: httpclient.InferenceServerClient) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("add_sub", "1")
    assert not client.is_model_ready("add_sub", "2")
    assert not client.is_model_ready("no_such_model")


def test_health_bodies_are_empty_like_triton(core_server: ServerProcess) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", core_server.http_port, timeout=30)
    connection.request("GET", "/v2/health/ready")
    response = connection.getresponse()
    assert (response.status, response.read()) == (200, b"")
    connection.request("GET", "/v2/models/no_such_model/ready")
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (400, {"error": "Model version not ready"})
    connection.close()


def test_server_metadata(client: httpclient.InferenceServerClient) -> None:
    metadata = client.get_server_metadata()
    assert metadata["name"] == "triton"
    assert metadata["version"]
    assert metadata["extensions"] == [  # Triton 2.51's list, in its order
        "classification",
        "sequence",
        "model_repository",
        "model_repository(unload_dependents)",
        "schedule_policy",
        "model_configuration",
        "system_shared_memory",
        "cuda_shared_memory",
        "binary_tensor_data",
        "parameters",
        "statistics",
        "trace",
        "logging",
    ]


def test_model_metadata(client: httpclient.InferenceServerClient) -> None:
    assert client.get_model_metadata("add_sub") == {
        "name": "add_sub",
        "versions": ["1"],
        "platform": "python",
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [4]},
            {"name": "INPUT1", "datatype": "FP32", "shape": [4]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]},
            {"name": "OUTPUT1", "datatype": "FP32", "shape": [4]},
        ],
    }


def test_batching_model_metadata_has_batch_dimension(client: httpclient.InferenceServerClient) -> None:
    metadata = client.get_model_metadata("string_reverse", "1")
    assert metadata["inputs"] == [{"name": "TEXT", "datatype": "BYTES", "shape": [-1, -1]}]


def test_model_metadata_of_unknown_model(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.get_model_metadata("no_such_model")
    assert caught.value.status() == "404"
    assert caught.value.message() == "Request for unknown model: 'no_such_model' is not found"


def test_model_config_is_the_normalised_config(client: httpclient.InferenceServerClient) -> None:
    config = client.get_model_config("add_sub_batch")
    assert config["name"] == "add_sub_batch"
    assert config["backend"] == "python"
    assert config["max_batch_size"] == 8
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    assert config["input"][0]["dims"] == [4]
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    assert config["instance_group"][0]["count"] == 1
    assert config["default_model_filename"] == "model.py"
    assert config["optimization"]["input_pinned_memory"] == {"enable": True}
