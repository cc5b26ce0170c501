"""System shared memory over HTTP with tritonclient's own helpers: every answer as Triton 2.51 gives it.

The expected texts and statuses are what a real Triton 2.51 answered to the same requests (naiad
adds a hint after some of them); where naiad deliberately differs it says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from naiad.testing import ServerProcess

from .conftest import Region, Registered

MISMATCH = (
    "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'add_sub'. Expected 64, got "
)
A = np.arange(16, dtype=np.float32).reshape(1, 16)
B = np.ones((1, 16), dtype=np.float32)


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.http_url)
    yield client
    client.close()


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://{server.http_url}") as raw:
        yield raw


def _inputs(name: str) -> list[httpclient.InferInput]:
    first = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    first.set_shared_memory(name, 64)
    second = httpclient.InferInput("INPUT1", [1, 16], "FP32")
    second.set_shared_memory(name, 64, offset=64)
    return [first, second]


def _error(call: object) -> InferenceServerException:
    assert callable(call)
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


def test_server_metadata_lists_system_shared_memory(client: httpclient.InferenceServerClient) -> None:
    extensions = client.get_server_metadata()["extensions"]
    assert "system_shared_memory" in extensions
    assert extensions.index("system_shared_memory") < extensions.index("binary_tensor_data")


def test_register_status_unregister(client: httpclient.InferenceServerClient, region: Region) -> None:
    name, key, _ = region(128)
    other, other_key, _ = region(64)
    client.register_system_shared_memory(other, other_key, 32, offset=16)
    client.register_system_shared_memory(name, key, 128)
    entries = [
        {"name": name, "key": key, "offset": 0, "byte_size": 128},
        {"name": other, "key": other_key, "offset": 16, "byte_size": 32},
    ]
    # listed by name, as Triton lists them, whatever the order they were registered in
    assert client.get_system_shared_memory_status() == sorted(entries, key=lambda entry: str(entry["name"]))
    assert client.get_system_shared_memory_status(other) == [
        {"name": other, "key": other_key, "offset": 16, "byte_size": 32}
    ]
    client.unregister_system_shared_memory(name)
    assert [entry["name"] for entry in client.get_system_shared_memory_status()] == [other]
    client.unregister_system_shared_memory()
    assert client.get_system_shared_memory_status() == []


def test_registration_errors_match_triton(client: httpclient.InferenceServerClient, region: Region) -> None:
    name, key, _ = region(128)
    client.register_system_shared_memory(name, key, 128)
    duplicate = _error(lambda: client.register_system_shared_memory(name, key, 128))
    assert duplicate.status() == "400"
    assert duplicate.message() == f"shared memory region '{name}' already in manager"
    missing = _error(lambda: client.register_system_shared_memory("x", "/naiad_no_such_object", 8))
    assert missing.status() == "500"
    assert missing.message().startswith("Unable to open shared memory region: '/naiad_no_such_object'")
    # Triton 2.51 answers 500 'Invalid shared memory region' here; naiad says INVALID_ARG, as later Tritons do.
    too_big = _error(lambda: client.register_system_shared_memory("x", key, 128, offset=64))
    assert too_big.status() == "400"
    assert too_big.message().startswith("failed to register shared memory region 'x': invalid args")
    unknown = _error(lambda: client.get_system_shared_memory_status("nope"))
    assert unknown.status() == "404"
    assert unknown.message() == "Unable to find system shared memory region: 'nope'"
    client.unregister_system_shared_memory("nope")  # unregistering an unknown region is not an error


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"byte_size": 8}, 400, "Shared memory register request has no 'key' field"),
        ({"key": "/k"}, 400, "Shared memory register request has no 'byte_size' field"),
        ({"key": "/k", "byte_size": -1}, 500, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
        ({"key": "/k", "byte_size": "8"}, 500, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
        (
            {"key": "/k", "byte_size": 8, "offset": 1.5},
            500,
            "attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
        ({"key": 5, "byte_size": 8}, 500, "attempt to access JSON non-string as string"),
        (b"", 500, "failed to parse the request JSON buffer: The document is empty. at 0"),
    ],
)
def test_malformed_register_requests(http: httpx.Client, body: object, status: int, message: str) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = http.post("/v2/systemsharedmemory/region/x/register", content=content)
    assert response.status_code == status
    assert response.json() == {"error": message}


def test_register_needs_a_region_name_and_the_right_method(http: httpx.Client) -> None:
    response = http.post("/v2/systemsharedmemory/register", json={"key": "/k", "byte_size": 8})
    assert response.status_code == 400
    assert response.json() == {"error": "'region name' is necessary to register system shared memory region"}
    assert http.get("/v2/systemsharedmemory/region/x/register").status_code == 405
    assert http.post("/v2/systemsharedmemory/status").status_code == 405
    ok = http.post("/v2/systemsharedmemory/region/x/unregister")
    assert (ok.status_code, ok.content, ok.headers["content-type"]) == (200, b"", "application/json")


@pytest.mark.parametrize(
    "key", ["/dev/shm/naiad_x", "../naiad_x", "/naiad/x", "/..", "/", "//", "/etc/passwd", "naiad_x/../x"]
)
def test_keys_that_are_not_posix_object_names_are_refused(client: httpclient.InferenceServerClient, key: str) -> None:
    error = _error(lambda: client.register_system_shared_memory("x", key, 8))
    assert error.status() == "400"
    assert error.message().startswith(f"cannot register shared memory region 'x' - invalid shm key '{key}'")
    assert client.get_system_shared_memory_status() == []


def test_reserved_and_non_object_keys_are_refused(client: httpclient.InferenceServerClient) -> None:
    error = _error(lambda: client.register_system_shared_memory("x", "/triton_python_backend_shm_region_7", 8))
    assert error.message() == (
        "cannot register shared memory region 'x' with key '/triton_python_backend_shm_region_7' as the key "
        "contains the reserved prefix 'triton_python_backend_shm_region_'"
    )
    link = f"/dev/shm/naiad_link_{os.getpid()}"
    os.symlink("/etc/hostname", link)
    try:
        followed = _error(lambda: client.register_system_shared_memory("x", link.removeprefix("/dev/shm"), 8))
        assert followed.message().startswith("Unable to open shared memory region")
    finally:
        os.unlink(link)


def test_inputs_and_outputs_through_shared_memory(
    client: httpclient.InferenceServerClient, registered: Registered
) -> None:
    inputs, _, in_handle = registered(128, A, B)
    outputs, _, out_handle = registered(128)
    first = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    first.set_shared_memory(outputs, 64)
    second = httpclient.InferRequestedOutput("OUTPUT1", binary_data=True)
    result = client.infer("add_sub", _inputs(inputs), outputs=[first, second])
    body = result.get_response()
    assert body["outputs"][0] == {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16]}  # no data, no parameters
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_handle, np.float32, [1, 16]), A + B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)
    # The model added 100 to its copy of INPUT0: the client's region is unchanged.
    np.testing.assert_array_equal(shm.get_contents_as_numpy(in_handle, np.float32, [1, 16]), A)


def test_output_at_an_offset_and_json_outputs_beside_it(
    http: httpx.Client, client: httpclient.InferenceServerClient, registered: Registered
) -> None:
    inputs, _, _ = registered(128, A, B)
    outputs, _, out_handle = registered(128)
    body = {
        "inputs": [
            {
                "name": "INPUT0",
                "datatype": "FP32",
                "shape": [1, 16],
                "parameters": {"shared_memory_region": inputs, "shared_memory_byte_size": 64},
            },
            {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [2.0] * 16},
        ],
        "outputs": [
            {
                "name": "OUTPUT1",
                "parameters": {
                    "shared_memory_region": outputs,
                    "shared_memory_offset": 64,
                    "shared_memory_byte_size": 64,
                    "binary_data": False,
                },
            },
            {"name": "OUTPUT0"},
        ],
    }
    response = http.post("/v2/models/add_sub/infer", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["outputs"] == [
        {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16], "data": (A + 2).reshape(-1).tolist()},
        {"name": "OUTPUT1", "datatype": "FP32", "shape": [1, 16]},
    ]
    written = shm.get_contents_as_numpy(out_handle, np.float32, [2, 16])
    np.testing.assert_array_equal(written[1], (A - 2)[0])
    np.testing.assert_array_equal(written[0], np.zeros(16, np.float32))  # nothing written before the offset


def _post(
    http: httpx.Client, inputs: list[dict[str, object]], outputs: list[dict[str, object]] | None = None
) -> httpx.Response:
    body: dict[str, object] = {"inputs": inputs}
    if outputs is not None:
        body["outputs"] = outputs
    return http.post("/v2/models/add_sub/infer", json=body)


def _shm_input(name: str, **parameters: object) -> list[dict[str, object]]:
    return [
        {
            "name": "INPUT0",
            "datatype": "FP32",
            "shape": [1, 16],
            "parameters": {"shared_memory_region": name, **parameters},
        },
        {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [1.0] * 16},
    ]


@pytest.mark.parametrize(
    ("parameters", "status", "message"),
    [
        (
            {"shared_memory_byte_size": 32},
            400,
            MISMATCH + "32",
        ),
        (
            {"shared_memory_byte_size": 128},
            400,
            MISMATCH + "128",
        ),
        ({}, 400, "Invalid offset + byte size for shared memory region: '{name}'"),
        (
            {"shared_memory_offset": 128, "shared_memory_byte_size": 64},
            400,
            "Invalid offset for shared memory region: '{name}'",
        ),
        (
            {"shared_memory_offset": 100, "shared_memory_byte_size": 64},
            400,
            "Invalid offset + byte size for shared memory region: '{name}'",
        ),
        (
            {"shared_memory_offset": 8, "shared_memory_byte_size": 2**64 - 1},
            400,
            "Invalid offset + byte size for shared memory region: '{name}'",
        ),
        (
            {"shared_memory_offset": -1, "shared_memory_byte_size": 64},
            500,
            "Unable to parse 'shared_memory_offset': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
        (
            {"shared_memory_offset": "0", "shared_memory_byte_size": 64},
            500,
            "Unable to parse 'shared_memory_offset': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
    ],
)
def test_input_windows_are_checked(
    http: httpx.Client,
    client: httpclient.InferenceServerClient,
    registered: Registered,
    parameters: dict[str, object],
    status: int,
    message: str,
) -> None:
    name, _, _ = registered(128)
    response = _post(http, _shm_input(name, **parameters))
    assert (response.status_code, response.json()) == (status, {"error": message.format(name=name)})


def test_unknown_regions_and_bad_region_names(http: httpx.Client) -> None:
    response = _post(http, _shm_input("nope", shared_memory_byte_size=64))
    assert (response.status_code, response.json()) == (404, {"error": "Unable to find shared memory region: 'nope'"})
    response = _post(http, _shm_input(3, shared_memory_byte_size=64))  # type: ignore[arg-type]
    assert response.status_code == 500
    assert response.json() == {
        "error": "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"
    }
    both = _shm_input("nope", shared_memory_byte_size=64)
    both[0]["data"] = [1.0] * 16
    response = _post(http, both)
    assert response.status_code == 400
    assert "But set 'data' 'shared_memory_region'" in response.json()["error"]


@pytest.mark.parametrize(
    ("parameters", "status", "message"),
    [
        (
            {"shared_memory_byte_size": 32},
            500,
            "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 "
            "bytes to hold the results",
        ),
        ({}, 400, "Invalid offset + byte size for shared memory region: '{name}'"),
        (
            {"shared_memory_offset": 100, "shared_memory_byte_size": 64},
            400,
            "Invalid offset + byte size for shared memory region: '{name}'",
        ),
        (
            {"shared_memory_byte_size": 64, "binary_data": True},
            400,
            "Output can't set both 'shared_memory_region' and 'binary_data'",
        ),
        (
            {"shared_memory_byte_size": 64, "classification": 2},
            400,
            "Output can't set both 'shared_memory_region' and 'classification'",
        ),
    ],
)
def test_output_windows_are_checked(
    http: httpx.Client,
    client: httpclient.InferenceServerClient,
    registered: Registered,
    parameters: dict[str, object],
    status: int,
    message: str,
) -> None:
    inputs, _, _ = registered(128, A, B)
    name, _, handle = registered(128, np.full(32, 7, np.float32))
    response = _post(
        http,
        _shm_input(inputs, shared_memory_byte_size=64),
        [{"name": "OUTPUT0", "parameters": {"shared_memory_region": name, **parameters}}],
    )
    assert (response.status_code, response.json()) == (status, {"error": message.format(name=name)})
    # Nothing was written: not into the window that was too small, not past it.
    np.testing.assert_array_equal(shm.get_contents_as_numpy(handle, np.float32, [32]), np.full(32, 7, np.float32))


def test_bytes_tensors_through_shared_memory(client: httpclient.InferenceServerClient, registered: Registered) -> None:
    strings = np.array([[b"ab", b"cde"]], dtype=np.object_)
    serialized = serialize_byte_tensor(strings)
    size = len(serialized.item())
    inputs, _, _ = registered(size, serialized)
    outputs, _, out_handle = registered(64)
    tensor = httpclient.InferInput("INPUT0", [1, 2], "BYTES")
    tensor.set_shared_memory(inputs, size)
    requested = httpclient.InferRequestedOutput("OUTPUT0")
    requested.set_shared_memory(outputs, 64)
    client.infer("strings", [tensor], outputs=[requested])
    reversed_ = shm.get_contents_as_numpy(out_handle, np.object_, [1, 2])
    assert reversed_.tolist() == [[b"cde", b"ab"]]
