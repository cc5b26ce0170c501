"""Finding 2, chunked-body DoS: an endless chunked body is cut off at ``--http-max-input-size``.

The probe streamed a chunked body for 30 s and the server buffered all of it (591 MiB). Now the
bytes are counted as they arrive: past the limit the server answers 400 with Triton's text and closes
the connection, with either HTTP server. uvicorn also enforces Triton's cap of 65,536 non-empty chunks
per body (hypercorn offers no hook for it; its bodies are bounded by size all the same). A body within
the limit that no endpoint reads is read all the same, so the connection serves on, as Triton's does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from naiad.testing import ServerProcess, start_server

from .http_helpers import ADD_SUB_JSON, build_repository, connect, head, read_response, rss_kib

LIMIT = 1024 * 1024
CHUNKED = {"Transfer-Encoding": "chunked"}


@pytest.fixture(scope="module", params=["uvicorn", "hypercorn"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("chunked") / "models")
    process = start_server([repository], f"--http-server={request.param}", f"--http-max-input-size={LIMIT}")
    yield process
    process.stop()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


@pytest.mark.parametrize("path", ["/v2/models/add_sub/infer", "/v2/models/add_sub/generate", "/v2/logging"])
def test_an_endless_chunked_body_is_cut_off_at_the_limit(server: ServerProcess, path: str) -> None:
    before = rss_kib(server.process.pid)
    piece = _chunk(b" " * 65536)
    sent = 0
    with connect(server.http_port, timeout=10) as sock:
        sock.sendall(head("POST", path, CHUNKED))
        started = time.monotonic()
        try:
            while sent < 256 * LIMIT and time.monotonic() - started < 20:
                sock.sendall(piece)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert sent < 64 * LIMIT, "the server kept reading past the limit"
        try:
            response = read_response(sock)
        except (ConnectionResetError, OSError):
            response = None
    if response is not None:  # the answer arrived before the reset of the unread rest, as it usually does
        assert response.status == 400
        assert "exceeds the maximum allowed input size of 1048576 bytes" in response.json()["error"]
        assert response.headers["connection"] == "close"
    assert rss_kib(server.process.pid) - before < 32 * 1024


def test_a_chunked_body_within_the_limit_is_served(server: ServerProcess) -> None:
    body = json.dumps(ADD_SUB_JSON).encode()
    with connect(server.http_port) as sock:
        sock.sendall(head("POST", "/v2/models/add_sub/infer", CHUNKED))
        sock.sendall(b"".join(_chunk(body[i : i + 7]) for i in range(0, len(body), 7)) + b"0\r\n\r\n")
        response = read_response(sock)
    assert response.status == 200
    assert response.json()["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


def _many_chunks(count: int) -> bytes:
    body = json.dumps(ADD_SUB_JSON).encode()
    body += b" " * (count - len(body))  # JSON allows trailing blanks: one byte per chunk
    return b"".join(_chunk(body[i : i + 1]) for i in range(count)) + b"0\r\n\r\n"


@pytest.mark.parametrize("server", ["uvicorn"], indirect=True)  # hypercorn has no hook to count chunks
def test_more_chunks_than_triton_allows_are_refused(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        sock.sendall(head("POST", "/v2/models/add_sub/infer", CHUNKED) + _many_chunks(65536))
        assert read_response(sock).status == 200
    with connect(server.http_port) as sock:
        sock.sendall(head("POST", "/v2/models/add_sub/infer", CHUNKED) + _many_chunks(65537))
        response = read_response(sock)
    assert response.status == 400
    assert response.json() == {
        "error": "Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or larger HTTP chunks."
    }
    assert response.headers["connection"] == "close"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/v2/models/add_sub//infer", 404), ("PUT", "/v2/models/add_sub/infer", 405), ("POST", "/v2", 405)],
)
@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_nobody_reads_is_read_and_the_connection_serves_on(
    server: ServerProcess, method: str, path: str, status: int, chunked: bool
) -> None:
    """As Triton's: an unknown path or a wrong method is answered, and the next request on the
    connection is served (the unread body used to close it)."""
    body = json.dumps(ADD_SUB_JSON).encode()
    framing = CHUNKED if chunked else {"Content-Length": str(len(body))}
    with connect(server.http_port) as sock:
        sock.sendall(head(method, path, framing) + (_chunk(body) + b"0\r\n\r\n" if chunked else body))
        refused = read_response(sock)
        assert (refused.status, refused.headers.get("connection")) == (status, None)
        sock.sendall(head("POST", "/v2/models/add_sub/infer", {"Content-Length": str(len(body))}) + body)
        served = read_response(sock)
    assert served.status == 200
    assert served.json()["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


def test_a_chunked_body_with_a_content_length_too_is_read_chunked(server: ServerProcess) -> None:
    """As Triton reads it (and RFC 9112 6.3 allows): the chunks say where the body ends, the length
    is ignored. `requests` sends both when a caller sets Content-Length on a generated body."""
    body = json.dumps(ADD_SUB_JSON).encode()
    for framing in ({**CHUNKED, "Content-Length": "5"}, {"Content-Length": str(len(body)), **CHUNKED}):
        with connect(server.http_port) as sock:
            sock.sendall(head("POST", "/v2/models/add_sub/infer", framing) + _chunk(body) + b"0\r\n\r\n")
            response = read_response(sock)
        assert response.status == 200
        assert response.json()["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("server", ["uvicorn"], indirect=True)  # hypercorn (h11) answers 501 with no body
def test_a_transfer_encoding_that_does_not_end_chunked_is_refused(server: ServerProcess) -> None:
    """Not read until the connection closes (which the leniency above would do): refused, with why."""
    body = json.dumps(ADD_SUB_JSON).encode()
    framing = {"Transfer-Encoding": "identity", "Content-Length": str(len(body))}
    with connect(server.http_port) as sock:
        sock.sendall(head("POST", "/v2/models/add_sub/infer", framing) + body)
        response = read_response(sock)
    assert response.status == 400
    assert "Transfer-Encoding does not end with 'chunked'" in response.json()["error"]
