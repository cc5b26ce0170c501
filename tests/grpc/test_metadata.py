"""Health, server and model metadata, model config and the unimplemented RPCs over gRPC."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from naiad.protocol import health_pb2
from naiad.testing import ServerProcess


@pytest.fixture
def client(grpc_server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    with grpcclient.InferenceServerClient(grpc_server.grpc_url) as client:
        yield client


@pytest.fixture
def stub(grpc_server: ServerProcess) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(grpc_server.grpc_url))


def test_health(client: grpcclient.InferenceServerClient) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("add_sub", "1")
    assert client.is_model_ready("repeat_int32")


def test_model_not_ready_is_false_not_an_error(client: grpcclient.InferenceServerClient) -> None:
    """Triton 2.51 answers OK with ready=false for unknown models and versions."""
    assert not client.is_model_ready("add_sub", "2")
    assert not client.is_model_ready("no_such_model")


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            "abc",
            "failed to get model version from specified version string 'abc' (details: stol), "
            "version should be an integral value > 0",
        ),
        (
            "99999999999999999999",
            "failed to get model version from specified version string '99999999999999999999' "
            "(details: stol), version should be an integral value > 0",
        ),
        ("-1", "invalid model version specified '-1' , version should be an integral value > 0"),
    ],
)
def test_bad_version_string(client: grpcclient.InferenceServerClient, version: str, message: str) -> None:
    for call in (client.is_model_ready, client.get_model_metadata, client.get_model_config):
        with pytest.raises(InferenceServerException) as caught:
            call("add_sub", version)
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert caught.value.message() == message


def test_version_with_trailing_text_is_read_like_stol(client: grpcclient.InferenceServerClient) -> None:
    assert client.is_model_ready("add_sub", "1abc")


def test_server_metadata(client: grpcclient.InferenceServerClient) -> None:
    metadata = client.get_server_metadata(as_json=True)
    assert metadata["name"] == "triton"
    assert metadata["version"]
    assert "model_configuration" in metadata["extensions"]


def test_model_metadata(client: grpcclient.InferenceServerClient) -> None:
    assert client.get_model_metadata("add_sub", as_json=True) == {
        "name": "add_sub",
        "versions": ["1"],
        "platform": "python",
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": ["4"]},
            {"name": "INPUT1", "datatype": "FP32", "shape": ["4"]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "FP32", "shape": ["4"]},
            {"name": "OUTPUT1", "datatype": "FP32", "shape": ["4"]},
        ],
    }


def test_batching_model_metadata_has_batch_dimension(client: grpcclient.InferenceServerClient) -> None:
    metadata = client.get_model_metadata("string_reverse", "1")
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [("TEXT", "BYTES", [-1, -1])]


@pytest.mark.parametrize(
    ("version", "code", "message"),
    [
        ("", "NOT_FOUND", "Request for unknown model: 'no_such_model' is not found"),
        ("7", "NOT_FOUND", "Request for unknown model: 'add_sub' version 7 is not found"),
    ],
)
def test_metadata_and_config_of_unknown_model(
    client: grpcclient.InferenceServerClient, version: str, code: str, message: str
) -> None:
    name = "add_sub" if version else "no_such_model"
    for call in (client.get_model_metadata, client.get_model_config):
        with pytest.raises(InferenceServerException) as caught:
            call(name, version)
        assert caught.value.status() == f"StatusCode.{code}"
        assert caught.value.message() == message


def test_model_config_is_the_normalised_config(client: grpcclient.InferenceServerClient) -> None:
    config = client.get_model_config("add_sub_batch", as_json=True)["config"]
    assert config["name"] == "add_sub_batch"
    assert config["backend"] == "python"
    assert config["max_batch_size"] == 8
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    assert config["input"][0]["dims"] == ["4"]
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    assert config["instance_group"][0]["count"] == 1
    assert config["default_model_filename"] == "model.py"
    assert config["optimization"]["input_pinned_memory"] == {"enable": True}


def test_model_config_protobuf_keeps_int64(client: grpcclient.InferenceServerClient) -> None:
    config = client.get_model_config("repeat_int32").config
    assert config.model_transaction_policy.decoupled
    assert list(config.input[0].dims) == [1]


def test_trace_setting_answers_the_server_settings(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    response = stub.TraceSetting(service_pb2.TraceSettingRequest(), timeout=10)
    assert {key: list(value.value) for key, value in response.settings.items()} == {
        "trace_level": ["OFF"],
        "trace_rate": ["1000"],
        "trace_count": ["-1"],
        "log_frequency": ["0"],
        "trace_file": [""],
        "trace_mode": ["triton"],
    }


def test_unknown_method_is_unimplemented(grpc_server: ServerProcess) -> None:
    with grpc.insecure_channel(grpc_server.grpc_url) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/NoSuchRpc")
        with pytest.raises(grpc.RpcError) as caught:
            call(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_grpc_health_check_serving(grpc_server: ServerProcess) -> None:
    with grpc.insecure_channel(grpc_server.grpc_url) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        response = check(health_pb2.HealthCheckRequest(service="anything"), timeout=10)
    assert response.status == health_pb2.HealthCheckResponse.SERVING
