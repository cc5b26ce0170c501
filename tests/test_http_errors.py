"""Bad requests get Triton's status and error text, and the server keeps serving."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

from .validation_cases import BAD_STRINGS, EMPTY_BATCHES, SEVERAL_MISTAKES, Mistakes, client_inputs


@pytest.fixture
def client(core_server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    with httpclient.InferenceServerClient(core_server.http_url) as client:
        yield client


def _post(
    server: ServerProcess, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    connection.request("POST", path, body=body, headers=headers or {})
    response = connection.getresponse()
    status, payload = response.status, response.read()
    connection.close()
    return status, json.loads(payload)


def _inputs(shape0: list[int], shape1: list[int], datatype1: str = "FP32") -> list[httpclient.InferInput]:
    first = httpclient.InferInput("INPUT0", shape0, "FP32")
    first.set_data_from_numpy(np.ones(shape0, dtype=np.float32))
    second = httpclient.InferInput("INPUT1", shape1, datatype1)
    second.set_data_from_numpy(np.ones(shape1, dtype=np.float32 if datatype1 == "FP32" else np.int32))
    return [first, second]


def _assert_still_serving(client: httpclient.InferenceServerClient) -> None:
    result = client.infer("add_sub", _inputs([4], [4]))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full(4, 2, dtype=np.float32))


def test_wrong_shape(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", _inputs([4], [5]))
    assert caught.value.status() == "400"
    assert caught.value.message() == (
        "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'add_sub'. Expected [4], got [5]. "
    )
    _assert_still_serving(client)


def test_missing_batch_dimension_mentions_max_batch_size(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub_batch", _inputs([4], [4]))
    assert caught.value.status() == "400"
    assert "Expected [-1,4], got [4]. NOTE: Setting a non-zero max_batch_size" in caught.value.message()


def test_batch_larger_than_max_batch_size(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub_batch", _inputs([9, 4], [9, 4]))
    assert caught.value.message() == (
        "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'add_sub_batch'"
    )


def test_wrong_datatype(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", _inputs([4], [4], "INT32"), request_id="r1")
    assert caught.value.status() == "400"
    assert caught.value.message() == (
        "[request id: r1] inference input 'INPUT1' data-type is 'INT32', but model 'add_sub' expects 'FP32'"
    )
    _assert_still_serving(client)


def test_missing_input(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", _inputs([4], [4])[:1])
    assert caught.value.status() == "400"
    assert caught.value.message() == (
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) "
        "['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."
    )
    _assert_still_serving(client)


def test_a_misnamed_input_is_named_as_in_triton(client: httpclient.InferenceServerClient) -> None:
    misnamed = httpclient.InferInput("INPUT9", [4], "FP32")
    misnamed.set_data_from_numpy(np.ones(4, dtype=np.float32))
    with pytest.raises(InferenceServerException) as caught:  # as many inputs as the model takes
        client.infer("add_sub", [_inputs([4], [4])[0], misnamed])
    assert caught.value.status() == "400"
    assert caught.value.message() == "unexpected inference input 'INPUT9' for model 'add_sub'"
    _assert_still_serving(client)


def test_an_extra_input_with_none_missing_is_worded_as_in_triton(client: httpclient.InferenceServerClient) -> None:
    extra = httpclient.InferInput("X", [1], "FP32")
    extra.set_data_from_numpy(np.ones(1, dtype=np.float32))
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", [*_inputs([4], [4]), extra])
    assert caught.value.status() == "400"
    assert caught.value.message().endswith(  # Triton writes no missing inputs as "]"
        "Got input(s) ['X','INPUT1','INPUT0'], but missing required input(s) ]. Please provide all required input(s)."
    )


@pytest.mark.parametrize(("shape", "data", "expected"), BAD_STRINGS)
def test_binary_bytes_data_is_walked_as_triton_walks_it(
    core_server: ServerProcess, shape: list[int], data: bytes, expected: str
) -> None:
    tensor = {"name": "TEXT", "shape": shape, "datatype": "BYTES", "parameters": {"binary_data_size": len(data)}}
    header = json.dumps({"inputs": [tensor]}).encode()
    status, answer = _post(
        core_server,
        "/v2/models/string_reverse/infer",
        header + data,
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert (status, answer) == (400, {"error": expected})


@pytest.mark.parametrize("case", EMPTY_BATCHES)
def test_inputs_leading_with_zero_items_are_sized_as_triton_sizes_them(
    client: httpclient.InferenceServerClient, case: Mistakes
) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer(case.model, client_inputs(httpclient, case))
    assert caught.value.status() == "400"
    assert caught.value.message() == case.message
    _assert_still_serving(client)


@pytest.mark.parametrize("case", SEVERAL_MISTAKES)
def test_of_several_mistakes_the_one_triton_names_is_named(
    client: httpclient.InferenceServerClient, case: Mistakes
) -> None:
    inputs = client_inputs(httpclient, case)
    with pytest.raises(InferenceServerException) as caught:
        client.infer(
            case.model, inputs, outputs=[httpclient.InferRequestedOutput(name) for name in case.outputs] or None
        )
    assert caught.value.status() == "400"
    assert caught.value.message() == case.message


def test_unknown_output(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", _inputs([4], [4]), outputs=[httpclient.InferRequestedOutput("NOPE")])
    assert caught.value.status() == "400"
    assert caught.value.message() == "unexpected inference output 'NOPE' for model 'add_sub'"


def test_unknown_model(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("no_such_model", _inputs([4], [4]))
    assert caught.value.status() == "404"
    assert caught.value.message() == "Request for unknown model: 'no_such_model' is not found"
    _assert_still_serving(client)


def test_unknown_version(client: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("add_sub", _inputs([4], [4]), model_version="7")
    assert caught.value.status() == "404"
    assert caught.value.message() == "Request for unknown model: 'add_sub' version 7 is not found"


@pytest.mark.parametrize(
    ("body", "message_start"),
    [
        (b"{not json", "failed to parse the request JSON buffer"),
        (b"\x00\x01\x02garbage", "failed to parse the request JSON buffer"),
        (b"{}", "Unable to parse 'inputs'"),
        (b'{"inputs": 5}', "Unable to parse 'inputs'"),
        (
            b'{"inputs":[{"name":"INPUT0","shape":[4],"datatype":"FP32","data":[1,2,"a",4]},'
            b'{"name":"INPUT1","shape":[4],"datatype":"FP32","data":[1,1,1,1]}]}',
            "Unable to parse 'data'",
        ),
        (
            b'{"inputs":[{"name":"INPUT0","shape":[4],"datatype":"FP32","data":[1,2,3]},'
            b'{"name":"INPUT1","shape":[4],"datatype":"FP32","data":[1,1,1,1]}]}',
            "Unable to parse 'data': Shape does not match",
        ),
    ],
)
def test_malformed_body(
    core_server: ServerProcess, client: httpclient.InferenceServerClient, body: bytes, message_start: str
) -> None:
    status, payload = _post(core_server, "/v2/models/add_sub/infer", body)
    assert status == 500
    assert payload["error"].startswith(message_start)
    _assert_still_serving(client)


def test_binary_data_shorter_than_declared(core_server: ServerProcess) -> None:
    header = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
                {"name": "INPUT1", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
            ]
        }
    ).encode()
    status, payload = _post(
        core_server,
        "/v2/models/add_sub/infer",
        header + bytes(20),
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 400
    assert payload["error"] == "unexpected size for input 'INPUT1', expecting 12 additional bytes for model 'add_sub'"


def test_of_two_data_size_mismatches_the_one_triton_names_is_named(core_server: ServerProcess) -> None:
    header = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 12}},
                {"name": "INPUT1", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 20}},
            ]
        }
    ).encode()
    status, payload = _post(
        core_server,
        "/v2/models/add_sub/infer",
        header + bytes(32),
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 400
    assert payload["error"] == (  # Triton checks INPUT1 first (naiad.hash_order)
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub'. "
        "Expected 16, got 20"
    )


@pytest.mark.parametrize("size", [-1, "16", 1.5, True])
def test_a_binary_data_size_that_is_not_an_unsigned_integer(core_server: ServerProcess, size: object) -> None:
    header = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": size}},
                {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            ]
        }
    ).encode()
    status, payload = _post(
        core_server,
        "/v2/models/add_sub/infer",
        header + bytes(16),
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 500
    assert payload["error"] == (
        "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer as unsigned-integer"
    )


def test_reserved_parameter_is_refused(core_server: ServerProcess) -> None:
    body = json.dumps(
        {
            "parameters": {"triton_secret": 1},
            "inputs": [
                {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            ],
        }
    ).encode()
    status, payload = _post(core_server, "/v2/models/add_sub/infer", body)
    assert status == 400
    assert payload["error"].startswith("parameter keys starting with 'triton_' are reserved")


def test_exception_in_execute_is_a_500_for_that_request_only(
    client: httpclient.InferenceServerClient,
) -> None:
    tensor = httpclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.ones(2, dtype=np.float32))
    with pytest.raises(InferenceServerException) as caught:
        client.infer("raises_in_execute", [tensor])
    assert caught.value.status() == "500"
    assert "cannot handle this input" in caught.value.message()
    assert "raises_in_execute" in caught.value.message()
    _assert_still_serving(client)


@pytest.mark.parametrize(
    ("method", "path", "status", "content_type"),
    [  # the content types Triton 2.51 answers these with
        ("GET", "/v2/nothing/here", 404, "text/plain"),
        ("GET", "/v2/models/add_sub/config/", 404, "text/plain"),  # a trailing slash: no redirect
        ("GET", "/v2/health/live/", 404, "text/plain"),
        ("POST", "/v2/repository/index/", 404, "text/plain"),
        ("GET", "/v2/models/add_sub/infer", 405, "text/plain"),
        ("POST", "/v2/health/live", 405, "text/plain"),
        ("POST", "/v2/models/add_sub/ready", 405, "text/plain"),
        ("POST", "/v2/models/add_sub/config", 405, "application/json"),
        ("PUT", "/v2/logging", 405, "application/json"),
        ("GET", "/v2/models/add_sub/generate", 405, "application/json"),
    ],
)
def test_unknown_path_and_wrong_method(
    core_server: ServerProcess, method: str, path: str, status: int, content_type: str
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", core_server.http_port, timeout=30)
    connection.request(method, path)
    response = connection.getresponse()
    error = "Not Found" if status == 404 else "Method Not Allowed"
    assert (response.status, response.getheader("content-type"), response.read()) == (
        status,
        content_type,
        json.dumps({"error": error}, separators=(",", ":")).encode(),
    )
    connection.close()


@pytest.mark.parametrize(
    ("path", "status", "content_type"),
    [  # Triton 2.51 takes HEAD nowhere
        ("/v2", 405, "application/json"),
        ("/v2/health/live", 405, "text/plain"),
        ("/v2/models/add_sub", 405, "application/json"),
        ("/v2/models/add_sub/ready", 405, "text/plain"),
        ("/v2/models/add_sub/config", 405, "application/json"),
        ("/v2/models/stats", 405, "application/json"),
        ("/v2/nothing/here", 404, "text/plain"),
    ],
)
def test_head_is_not_allowed(core_server: ServerProcess, path: str, status: int, content_type: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", core_server.http_port, timeout=30)
    connection.request("HEAD", path)
    response = connection.getresponse()
    assert (response.status, response.getheader("content-type"), response.read()) == (status, content_type, b"")
    connection.close()


@pytest.mark.parametrize("path", ["/v2/health/live", "/v2/health/ready", "/v2/models/add_sub/ready"])
def test_an_empty_200_is_text(core_server: ServerProcess, path: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", core_server.http_port, timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    assert (response.status, response.getheader("content-type"), response.read()) == (200, "text/plain", b"")
    connection.close()


def test_a_version_that_is_not_ready_is_answered_as_text(core_server: ServerProcess) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", core_server.http_port, timeout=30)
    connection.request("GET", "/v2/models/add_sub/versions/99/ready")
    response = connection.getresponse()
    assert (response.status, response.getheader("content-type"), response.read()) == (
        400,
        "text/plain",
        b'{"error":"Model version not ready"}',
    )
    # A version past int64: Triton's parser says so (any model).
    connection.request("GET", "/v2/models/add_sub/versions/99999999999999999999/ready")
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (
        400,
        {
            "error": "failed to get model version from specified version string '99999999999999999999' "
            "(details: stol), version should be an integral value > 0"
        },
    )
    connection.close()


@pytest.mark.parametrize(
    ("model", "encoding", "status", "headers", "error"),
    [  # as Triton 2.51 answers them: the model is looked at before the body's encoding
        ("add_sub", "br", 501, ("text/plain", "gzip, deflate"), "Unsupported compression type"),
        ("add_sub", "GZIP", 501, ("text/plain", "gzip, deflate"), "Unsupported compression type"),
        ("nope", "br", 404, ("text/plain", None), "Request for unknown model: 'nope' is not found"),
        ("add_sub", "gzip", 400, ("text/plain", None), "nothing to be decompressed"),
    ],
)
def test_a_body_encoding_is_refused_as_triton_refuses_it(
    core_server: ServerProcess, model: str, encoding: str, status: int, headers: tuple[str, str | None], error: str
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", core_server.http_port, timeout=30)
    connection.request("POST", f"/v2/models/{model}/infer", body=b"", headers={"Content-Encoding": encoding})
    response = connection.getresponse()
    answer = (response.status, (response.getheader("content-type"), response.getheader("accept-encoding")))
    assert answer == (status, headers)
    assert json.loads(response.read()) == {"error": error}
    connection.close()
