"""Findings 2 and 6, shape overflow and JSON depth: a 400 (INVALID_ARGUMENT on gRPC) with a plain
message, never a 500 from Python.

The probe got 500 ``RecursionError`` for JSON nested 100,000 deep, and 500 with numpy's exception
text for shapes numpy cannot build (more than 64 dimensions, dimensions of 2^63 and more next to a 0).
Now tensor data nests at most Triton's ``HTTP_MAX_JSON_NESTING_DEPTH`` (100) deep, deeper documents
get Triton's nesting text, and every shape is checked (Triton's texts for invalid dimensions and
overflowing counts or byte sizes) before any data is decoded, on HTTP and gRPC alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from naiad.testing import ServerProcess, start_server

from .http_helpers import build_repository, post_json, request

TOO_DEEP = {"error": "JSON nesting depth exceeds maximum allowed limit (100)"}
INT64_MAX = 2**63 - 1
INVALID = "contains one or more invalid dimensions"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server([build_repository(tmp_path_factory.mktemp("shapes") / "models")])
    yield process
    process.stop()


def _deep(depth: int) -> bytes:
    return b'{"inputs":' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(
    "path", ["/v2/models/add_sub/infer", "/v2/models/add_sub/generate", "/v2/repository/index", "/v2/logging"]
)
def test_a_document_nested_100000_deep_is_a_400(server: ServerProcess, path: str) -> None:
    response = request(server.http_port, "POST", path, _deep(100_000))
    assert (response.status, response.json()) == (400, TOO_DEEP)
    assert request(server.http_port, "GET", "/v2/health/live").status == 200


def _nested_data(extra_levels: int) -> dict[str, object]:
    data: object = [1.0, 2.0, 3.0, 4.0]
    for _ in range(extra_levels):
        data = [data]
    return {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": data}]}


def test_tensor_data_nests_as_deep_as_triton_allows(server: ServerProcess) -> None:
    response = post_json(server.http_port, "/v2/models/identity_fp32/infer", _nested_data(98))
    assert response.status == 200
    assert response.json()["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]
    response = post_json(server.http_port, "/v2/models/identity_fp32/infer", _nested_data(99))
    assert (response.status, response.json()) == (400, TOO_DEEP)


def _shape_error(server: ServerProcess, shape: list[int]) -> tuple[int, str]:
    document = {"inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": []}]}
    response = post_json(server.http_port, "/v2/models/identity_any_rank/infer", document)  # any integer size
    return response.status, response.json()["error"]


def _text(shape: list[int]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([1] * 70, "invalid shape for input 'INPUT0': 70 dimensions, more than the 64 supported"),
        ([2**63, 0], f"invalid shape for input 'INPUT0': shape {_text([2**63, 0])} {INVALID}"),
        (
            [2**32, 2**32],
            f"invalid shape for input 'INPUT0': shape {_text([2**32, 2**32])} causes total element count to exceed "
            f"maximum size of {INT64_MAX}",
        ),
        (
            [2**61, 1],
            f"byte size overflow for input 'INPUT0': element count ({2**61}) * data type size (4) exceeds maximum "
            f"allowed size ({INT64_MAX})",
        ),
        (
            [2**62, 0],
            f"invalid shape for input 'INPUT0': shape {_text([2**62, 0])} is too large; its non-zero dimensions "
            f"multiply to more than the {INT64_MAX // 4} elements an array of FP32 can have",
        ),
    ],
)
def test_shapes_numpy_cannot_build_are_a_400(server: ServerProcess, shape: list[int], message: str) -> None:
    assert _shape_error(server, shape) == (400, message)


def test_the_same_shapes_with_binary_data_are_a_400(server: ServerProcess) -> None:
    for shape in ([1] * 70, [2**63, 0], [2**62, 0]):
        header = json.dumps(
            {"inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32", "parameters": {"binary_data_size": 0}}]}
        ).encode()
        response = request(
            server.http_port,
            "POST",
            "/v2/models/identity_any_rank/infer",
            header,
            {"Inference-Header-Content-Length": str(len(header))},
        )
        assert response.status == 400
        assert response.json()["error"].startswith("invalid shape for input 'INPUT0'")


def test_a_zero_sized_tensor_with_a_large_dimension_is_served(server: ServerProcess) -> None:
    document = {"inputs": [{"name": "INPUT0", "shape": [0, 2**40], "datatype": "FP32", "data": []}]}
    response = post_json(server.http_port, "/v2/models/identity_any_rank/infer", document)
    assert response.status == 200
    assert response.json()["outputs"][0]["shape"] == [0, 2**40]


def test_json_data_is_read_before_the_models_checks_as_in_triton(server: ServerProcess) -> None:
    document = {"inputs": [{"name": "INPUT0", "shape": [3, 4], "datatype": "FP32", "data": ["not", "numbers"]}]}
    response = post_json(server.http_port, "/v2/models/identity_fp32/infer", document)
    assert response.status == 500
    assert response.json()["error"] == "Unable to parse 'data': attempt to access JSON non-number as double"


def test_a_dimension_beyond_uint64_gets_tritons_parse_error(server: ServerProcess) -> None:
    assert _shape_error(server, [0, 2**64 + 5]) == (
        500,
        "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer",
    )


def test_a_negative_dimension_gets_tritons_parse_error(server: ServerProcess) -> None:
    # Triton 2.51 answers a negative JSON dimension with this 500 (its JSON reader's unsigned-integer error).
    assert _shape_error(server, [-1, 4]) == (
        500,
        "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer",
    )


@pytest.mark.parametrize(
    ("shape", "start"),
    [
        ([1] * 70, "invalid shape for input 'INPUT0': 70 dimensions, more than the 64 supported"),
        ([2**32, 2**32], "invalid shape for input 'INPUT0': shape [4294967296,4294967296] causes total element"),
        ([2**61, 1], "byte size overflow for input 'INPUT0': element count (2305843009213693952)"),
        ([2**62, 0], "invalid shape for input 'INPUT0': shape [4611686018427387904,0] is too large"),
    ],
)
def test_grpc_shapes_numpy_cannot_build_are_invalid_arguments(
    server: ServerProcess, shape: list[int], start: str
) -> None:
    request_message = service_pb2.ModelInferRequest(model_name="identity_any_rank")
    request_message.inputs.add(name="INPUT0", datatype="FP32", shape=shape)
    request_message.raw_input_contents.append(b"\0" * 4)
    with grpc.insecure_channel(server.grpc_url) as channel, pytest.raises(grpc.RpcError) as refused:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request_message, timeout=10)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith(start)
