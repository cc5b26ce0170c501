"""The infer fast lane answers exactly as the ASGI infer endpoint does.

A plain infer request (Content-Length, no encodings) is answered by naiad's protocol itself
(:mod:`naiad.http.infer_lane`); the same request with a chunked body goes through ASGI. Both must give
the same status, headers and body, for answers and errors alike, on plain sockets.
"""

from __future__ import annotations

import gzip
import json
import socket

import numpy as np
import pytest

from naiad.testing import ServerProcess

from .security.http_helpers import Response, connect, head, read_response

ADD_SUB = {
    "id": "r-1",
    "inputs": [
        {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
    ],
}


def _binary_add_sub() -> tuple[bytes, int]:
    header = json.dumps(
        {
            "inputs": [
                {"name": name, "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}
                for name in ("INPUT0", "INPUT1")
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    data = np.arange(4, dtype=np.float32).tobytes() + np.ones(4, dtype=np.float32).tobytes()
    return header + data, len(header)


def _send(sock: socket.socket, path: str, body: bytes, headers: dict[str, str], *, chunked: bool) -> Response:
    if chunked:  # the ASGI path
        framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
        sock.sendall(head("POST", path, {"Transfer-Encoding": "chunked", **headers}) + framed)
    else:  # the fast lane
        sock.sendall(head("POST", path, {"Content-Length": str(len(body)), **headers}) + body)
    return read_response(sock)


def _both_ways(server: ServerProcess, path: str, body: bytes, headers: dict[str, str] | None = None) -> Response:
    """Send the request both ways; assert the answers match; return the fast lane's."""
    answers = []
    for chunked in (False, True):
        with connect(server.http_port) as sock:
            answers.append(_send(sock, path, body, headers or {}, chunked=chunked))
    fast, asgi = answers
    fast.headers.pop("date", None)
    asgi.headers.pop("date", None)
    assert (fast.status, fast.headers, fast.body) == (asgi.status, asgi.headers, asgi.body)
    return fast


@pytest.fixture
def server(core_server: ServerProcess) -> ServerProcess:
    return core_server


@pytest.mark.parametrize("path", ["/v2/models/add_sub/infer", "/v2/models/add_sub/versions/1/infer"])
def test_a_json_request_is_answered_alike(server: ServerProcess, path: str) -> None:
    response = _both_ways(server, path, json.dumps(ADD_SUB).encode())
    assert response.status == 200
    document = response.json()
    assert document["id"] == "r-1"
    assert document["model_name"] == "add_sub"
    assert [output["data"] for output in document["outputs"]] == [[2, 3, 4, 5], [0, 1, 2, 3]]


def test_a_binary_request_is_answered_alike(server: ServerProcess) -> None:
    body, length = _binary_add_sub()
    response = _both_ways(server, "/v2/models/add_sub/infer", body, {"Inference-Header-Content-Length": str(length)})
    assert response.status == 200
    json_length = int(response.headers["inference-header-content-length"])
    assert np.frombuffer(response.body[json_length:], np.float32).tolist() == [1, 2, 3, 4]


def test_a_compressed_answer_is_alike(server: ServerProcess) -> None:
    response = _both_ways(server, "/v2/models/add_sub/infer", json.dumps(ADD_SUB).encode(), {"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert json.loads(gzip.decompress(response.body))["model_name"] == "add_sub"


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [  # Triton answers an unknown model and a model's own failure as text/plain, the rest as JSON
        ("/v2/models/no_such_model/infer", json.dumps(ADD_SUB).encode(), "text/plain"),
        ("/v2/models/add_sub/versions/7/infer", json.dumps(ADD_SUB).encode(), "text/plain"),
        ("/v2/models/add_sub/infer", b'{"inputs": [', "application/json"),
        ("/v2/models/add_sub/infer", b"", "application/json"),
        ("/v2/models/add_sub/infer", json.dumps({"inputs": ADD_SUB["inputs"][:1]}).encode(), "application/json"),
        ("/v2/models/raises_in_execute/infer", json.dumps({"inputs": [ADD_SUB["inputs"][0]]}).encode(), "text/plain"),
    ],
)
def test_errors_are_answered_alike(server: ServerProcess, path: str, body: bytes, content_type: str) -> None:
    response = _both_ways(server, path, body)
    assert response.status >= 400
    assert response.headers["content-type"] == content_type
    assert set(response.json()) == {"error"}


def test_a_path_with_a_byte_beyond_ascii_is_answered_alike(server: ServerProcess) -> None:
    assert _both_ways(server, "/v2/models/mod\u00e8le/infer", json.dumps(ADD_SUB).encode()).status >= 400


def test_one_connection_carries_many_requests(server: ServerProcess) -> None:
    body = json.dumps(ADD_SUB).encode()
    with connect(server.http_port) as sock:
        for _ in range(50):
            response = _send(sock, "/v2/models/add_sub/infer", body, {}, chunked=False)
            assert response.status == 200
            assert "connection" not in response.headers


def test_a_request_that_says_close_gets_its_answer_and_the_connection_ends(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        response = _send(
            sock, "/v2/models/add_sub/infer", json.dumps(ADD_SUB).encode(), {"Connection": "close"}, chunked=False
        )
        assert response.status == 200
        assert response.headers["connection"] == "close"
        sock.settimeout(5)
        assert sock.recv(1) == b""
