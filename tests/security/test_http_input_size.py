"""Finding 2, HTTP input size: a body over ``--http-max-input-size`` is refused before it is read.

The probe sent a 1 GiB body that the server read whole (2.1 GB peak) before answering. Now a
declared Content-Length over the limit is answered at once with Triton's text and the connection is
closed, on every endpoint and with either HTTP server; a JSON tensor whose shape asks for more than
the limit is refused before its data is decoded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.testing import ServerProcess, start_server

from .http_helpers import ADD_SUB_JSON, build_repository, connect, head, post_json, read_response, request, rss_kib

LIMIT = 1024 * 1024
GIB = 1024**3


@pytest.fixture(scope="module", params=["uvicorn", "hypercorn"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("input_size") / "models")
    process = start_server([repository], f"--http-server={request.param}", f"--http-max-input-size={LIMIT}")
    yield process
    process.stop()


def _text(size: int, what: str = "request body") -> str:
    return (
        f"{what} size of {size} bytes exceeds the maximum allowed input size of {LIMIT} bytes. "
        "Use --http-max-input-size to increase the limit."
    )


@pytest.mark.parametrize(
    ("path", "headers", "message"),
    [
        ("/v2/models/add_sub/infer", {}, _text(GIB, "request JSON")),
        (
            "/v2/models/identity_uint8/infer",
            {"Inference-Header-Content-Length": "0"},
            f"Raw input has a byte_size ({GIB} bytes) that exceeds the maximum allowed value of {LIMIT} bytes. "
            "Use --http-max-input-size to increase the limit.",
        ),
        ("/v2/models/add_sub/infer", {"Inference-Header-Content-Length": "100"}, _text(GIB)),
        ("/v2/models/add_sub/generate", {}, _text(GIB)),
        ("/v2/repository/index", {}, _text(GIB)),
        ("/v2/logging", {}, _text(GIB)),
    ],
)
def test_declared_length_over_the_limit_is_refused_before_the_body_is_sent(
    server: ServerProcess, path: str, headers: dict[str, str], message: str
) -> None:
    with connect(server.http_port, timeout=5) as sock:
        sock.sendall(head("POST", path, {"Content-Length": str(GIB), **headers}))
        response = read_response(sock)  # no body byte was sent: the answer cannot wait for it
    assert response.status == 400
    assert response.json() == {"error": message}
    assert response.headers["connection"] == "close"


def test_an_oversized_upload_is_cut_off_not_buffered(server: ServerProcess) -> None:
    before = rss_kib(server.process.pid)
    sent = 0
    chunk = bytes(1024 * 1024)
    started = time.monotonic()
    with connect(server.http_port, timeout=5) as sock:
        sock.sendall(head("POST", "/v2/models/add_sub/infer", {"Content-Length": str(64 * 1024 * 1024)}))
        try:
            while sent < 64 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert sent < 64 * 1024 * 1024, "the server kept reading a body it had refused"
    assert time.monotonic() - started < 5
    assert rss_kib(server.process.pid) - before < 16 * 1024


def test_json_tensor_larger_than_the_limit_is_refused_before_its_data_is_decoded(server: ServerProcess) -> None:
    document = {"inputs": [{"name": "INPUT0", "shape": [10**9], "datatype": "FP32", "data": [1.0]}]}
    response = post_json(server.http_port, "/v2/models/identity_fp32/infer", document)
    assert response.status == 400
    assert response.json() == {
        "error": f"JSON input 'INPUT0' has a byte_size (4000000000 bytes) that exceeds the maximum allowed value of "
        f"{LIMIT} bytes. Use --http-max-input-size to increase the limit."
    }


def test_json_bytes_tensor_larger_than_the_limit_is_refused(server: ServerProcess) -> None:
    # An empty string costs 3 bytes of JSON ('"",') and 4 bytes of tensor (its length prefix).
    count = 300_000
    document = {"inputs": [{"name": "INPUT0", "shape": [count], "datatype": "BYTES", "data": [""] * count}]}
    body = json.dumps(document, separators=(",", ":")).encode()
    assert len(body) < LIMIT < 4 * count
    response = request(server.http_port, "POST", "/v2/models/identity_bytes/infer", body)
    assert response.status == 400
    assert response.json() == {
        "error": f"JSON input 'INPUT0' has a byte_size ({4 * count} bytes) that exceeds the maximum allowed value of "
        f"{LIMIT} bytes. Use --http-max-input-size to increase the limit."
    }
    document["inputs"][0].update(shape=[1000], data=["x" * 1000] * 1000)  # 1,004,000 bytes: under the limit
    assert post_json(server.http_port, "/v2/models/identity_bytes/infer", document).status == 200


def test_binary_data_size_beyond_the_body_is_refused(server: ServerProcess) -> None:
    declared = {"name": "INPUT0", "shape": [2**40], "datatype": "UINT8", "parameters": {"binary_data_size": 2**40}}
    header = json.dumps({"inputs": [declared]}).encode()
    response = request(
        server.http_port,
        "POST",
        "/v2/models/identity_uint8/infer",
        header + bytes(16),
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert response.status == 400
    assert response.json() == {
        "error": f"unexpected size for input 'INPUT0', expecting {2**40 - 16} additional bytes for model "
        "'identity_uint8'"
    }


def test_requests_within_the_limit_are_served_and_the_connection_kept(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    data = np.arange(LIMIT - 4096, dtype=np.int64).astype(np.uint8)
    tensor = httpclient.InferInput("INPUT0", list(data.shape), "UINT8")
    tensor.set_data_from_numpy(data, binary_data=True)
    result = client.infer("identity_uint8", [tensor])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
    with connect(server.http_port) as sock:
        body = json.dumps(ADD_SUB_JSON).encode()
        for _ in range(2):
            sock.sendall(head("POST", "/v2/models/add_sub/infer", {"Content-Length": str(len(body))}) + body)
            response = read_response(sock)
            assert response.status == 200
            assert "connection" not in response.headers


def test_unknown_model_with_a_small_body_keeps_the_connection(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        body = json.dumps(ADD_SUB_JSON).encode()
        for _ in range(2):
            sock.sendall(head("POST", "/v2/models/nope/infer", {"Content-Length": str(len(body))}) + body)
            response = read_response(sock)
            assert response.status == 404
            assert "connection" not in response.headers


def test_generate_and_repository_bodies_within_the_limit_work(server: ServerProcess) -> None:
    assert post_json(server.http_port, "/v2/repository/index", {"ready": True}).status == 200
    response = post_json(server.http_port, "/v2/models/add_sub/generate", {"INPUT0": [1, 2, 3, 4], "INPUT1": [1] * 4})
    assert response.status == 200
    assert response.json()["OUTPUT0"] == [2.0, 3.0, 4.0, 5.0]
