"""Inference over HTTP with the real tritonclient: JSON, binary, every datatype, compression."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.testing import ServerProcess


@pytest.fixture
def client(core_server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    with httpclient.InferenceServerClient(core_server.http_url) as client:
        yield client


def _add_sub_inputs(
    binary: bool, shape: tuple[int, ...] = (4,)
) -> tuple[list[httpclient.InferInput], np.ndarray, np.ndarray]:
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    b = np.full(shape, 0.5, dtype=np.float32)
    inputs = [
        httpclient.InferInput("INPUT0", list(shape), "FP32"),
        httpclient.InferInput("INPUT1", list(shape), "FP32"),
    ]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    return inputs, a, b


@pytest.mark.parametrize("binary", [False, True])
def test_add_sub_returns_all_outputs(client: httpclient.InferenceServerClient, binary: bool) -> None:
    inputs, a, b = _add_sub_inputs(binary)
    outputs = [httpclient.InferRequestedOutput(name, binary_data=binary) for name in ("OUTPUT0", "OUTPUT1")]
    result = client.infer("add_sub", inputs, outputs=outputs, request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    response = result.get_response()
    assert response["model_name"] == "add_sub"
    assert response["model_version"] == "1"
    assert response["id"] == "req-7"


def test_add_sub_without_requested_outputs_returns_every_output(
    client: httpclient.InferenceServerClient,
) -> None:
    inputs, a, b = _add_sub_inputs(binary=True)
    result = client.infer("add_sub", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("binary", [False, True])
def test_asking_for_one_output_returns_only_that_one(client: httpclient.InferenceServerClient, binary: bool) -> None:
    inputs, a, b = _add_sub_inputs(binary)
    result = client.infer("add_sub", inputs, outputs=[httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary)])
    assert [output["name"] for output in result.get_response()["outputs"]] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.as_numpy("OUTPUT0") is None


def test_batching_model_takes_several_rows(client: httpclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs(binary=True, shape=(3, 4))
    result = client.infer("add_sub_batch", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    assert result.as_numpy("OUTPUT0").shape == (3, 4)


def _round_trip(
    client: httpclient.InferenceServerClient, model: str, data: np.ndarray, datatype: str, binary: bool
) -> np.ndarray:
    tensor = httpclient.InferInput("INPUT0", list(data.shape), datatype)
    tensor.set_data_from_numpy(data, binary_data=binary)
    result = client.infer(model, [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)])
    output = result.as_numpy("OUTPUT0")
    assert result.get_response()["outputs"][0]["datatype"] == datatype
    return output


@pytest.mark.parametrize("binary", [False, True])
def test_bytes_round_trip_with_empty_strings(client: httpclient.InferenceServerClient, binary: bool) -> None:
    data = np.array([b"hello", b"", "wörld".encode(), b""], dtype=np.object_)
    output = _round_trip(client, "identity_bytes", data, "BYTES", binary)
    assert [item if isinstance(item, bytes) else item.encode() for item in output] == list(data)


def test_bytes_round_trip_keeps_non_utf8_bytes(client: httpclient.InferenceServerClient) -> None:
    data = np.array([b"\xff\xfe\x00\x80", b"\x00", b"plain"], dtype=np.object_)
    output = _round_trip(client, "identity_bytes", data, "BYTES", binary=True)
    assert list(output) == list(data)


def test_bytes_model_with_batch(client: httpclient.InferenceServerClient) -> None:
    data = np.array([[b"abc", b"xy"], [b"", b"\x01\x02"]], dtype=np.object_)
    tensor = httpclient.InferInput("TEXT", [2, 2], "BYTES")
    tensor.set_data_from_numpy(data)
    output = client.infer("string_reverse", [tensor]).as_numpy("REVERSED")
    assert output.tolist() == [[b"cba", b"yx"], [b"", b"\x02\x01"]]


def test_fp16_round_trip(client: httpclient.InferenceServerClient) -> None:
    data = np.array([0.5, -1.25, 65504.0, 0.0], dtype=np.float16)
    np.testing.assert_array_equal(_round_trip(client, "identity_fp16", data, "FP16", binary=True), data)


@pytest.mark.parametrize("binary", [False, True])
def test_int64_round_trip_keeps_large_values(client: httpclient.InferenceServerClient, binary: bool) -> None:
    data = np.array([2**62, -(2**62), 0, 7], dtype=np.int64)
    np.testing.assert_array_equal(_round_trip(client, "identity_int64", data, "INT64", binary), data)


@pytest.mark.parametrize("binary", [False, True])
def test_bool_round_trip(client: httpclient.InferenceServerClient, binary: bool) -> None:
    data = np.array([True, False, False, True, True])
    np.testing.assert_array_equal(_round_trip(client, "identity_bool", data, "BOOL", binary), data)


@pytest.mark.parametrize(
    ("model", "dtype", "datatype"),
    [("identity_uint8", np.uint8, "UINT8"), ("identity_fp64", np.float64, "FP64")],
)
def test_other_numeric_round_trips(
    client: httpclient.InferenceServerClient, model: str, dtype: type, datatype: str
) -> None:
    data = np.array([0, 1, 200, 3], dtype=dtype)
    np.testing.assert_array_equal(_round_trip(client, model, data, datatype, binary=True), data)


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_request_and_response(client: httpclient.InferenceServerClient, algorithm: str) -> None:
    inputs, a, b = _add_sub_inputs(binary=True)
    result = client.infer(
        "add_sub", inputs, request_compression_algorithm=algorithm, response_compression_algorithm=algorithm
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_explicit_version_is_served(client: httpclient.InferenceServerClient) -> None:
    inputs, a, b = _add_sub_inputs(binary=True)
    result = client.infer("add_sub", inputs, model_version="1")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def _read_response(sock: socket.socket, buffer: bytearray) -> tuple[list[bytes], bytes]:
    """One HTTP/1.1 response from ``sock`` (``buffer`` keeps what arrived past it): header lines, body."""
    while b"\r\n\r\n" not in buffer:
        buffer += sock.recv(65536)
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = int(next(line.split(b":")[1] for line in lines if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        rest += sock.recv(65536)
    buffer[:] = rest[length:]
    return lines, rest[:length]


def test_pipelined_requests_on_one_connection_are_answered_in_order(core_server: ServerProcess) -> None:
    def request(request_id: str) -> bytes:
        inputs = [
            {"name": name, "shape": [4], "datatype": "FP32", "data": [1.0, 2.0, 3.0, 4.0]}
            for name in ("INPUT0", "INPUT1")
        ]
        body = json.dumps({"id": request_id, "inputs": inputs}).encode()
        head = f"POST /v2/models/add_sub/infer HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n"
        return head.encode() + body

    with socket.create_connection(("127.0.0.1", core_server.http_port), timeout=30) as sock:
        sock.sendall(b"".join(request(request_id) for request_id in ("a", "b", "c")))
        buffer = bytearray()
        answers = [_read_response(sock, buffer) for _ in range(3)]
    for (lines, body), request_id in zip(answers, ("a", "b", "c"), strict=True):
        assert lines[0].startswith(b"HTTP/1.1 200")
        assert sum(line.lower().startswith(b"content-length:") for line in lines) == 1
        assert not any(line.lower() == b"connection: close" for line in lines)
        document = json.loads(body)
        assert document["id"] == request_id
        assert document["outputs"][0]["data"] == [2.0, 4.0, 6.0, 8.0]
