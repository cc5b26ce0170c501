"""Findings 2 and 4, headers and slowloris: header size, count and time limits, body pauses, idle connections.

The probe's 256 MiB header was accumulated quadratically (28 s, other clients' p50 5.3 s), 500,000
headers were accepted, and connections that never finished their headers or body, or sent nothing,
were never closed. Now (small limits here, to run in seconds):

- headers over ``--http-max-header-size`` or ``--http-max-headers`` are answered 431 and the
  connection closed (uvicorn while it parses them; hypercorn bounds a head still arriving, and the
  app refuses a complete one);
- headers must arrive within ``--http-header-timeout`` of the request's first byte (uvicorn: 408 and
  closed; hypercorn bounds the headers by its idle timeout);
- a body that pauses longer than ``--http-body-timeout`` is answered 408 and closed (both servers);
- a connection idle for ``--http-idle-timeout``, new or between requests, is closed (both servers).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from naiad.testing import ServerProcess, start_server

from .http_helpers import ADD_SUB_JSON, build_repository, closed_by_server, connect, head, read_response, request

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0
IDLE_TIMEOUT = 2.0
LIMITS = (
    "--http-max-header-size=4096",
    "--http-max-headers=20",
    f"--http-header-timeout={HEADER_TIMEOUT}",
    f"--http-body-timeout={BODY_TIMEOUT}",
    f"--http-idle-timeout={IDLE_TIMEOUT}",
)


@pytest.fixture(scope="module", params=["uvicorn", "hypercorn"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("slowloris") / "models")
    process = start_server([repository], f"--http-server={request.param}", *LIMITS)
    yield process
    process.stop()


UVICORN_ONLY = pytest.mark.parametrize("server", ["uvicorn"], indirect=True)
"""For limits hypercorn has no hook for (see naiad.http.serving), and for the metrics listener, which
runs uvicorn whatever ``--http-server`` says."""


def _hypercorn(server: ServerProcess) -> bool:
    return "(hypercorn)" in server.logs()  # the ready line names the HTTP server


def test_headers_over_the_size_limit_are_answered_431(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        sock.sendall(head("GET", "/v2/health/live", {"X-Big": "a" * 8192}))
        response = read_response(sock)
        assert closed_by_server(sock, 2)
    assert response.status == 431
    assert response.json() == {"error": "the request headers exceed 4096 bytes, the most --http-max-header-size allows"}
    assert response.headers["connection"] == "close"


def test_an_endless_header_is_cut_off_and_others_are_served(server: ServerProcess) -> None:
    sent = 0
    slowest = 0.0
    with connect(server.http_port, timeout=5) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nX-Endless: ")
        started = time.monotonic()
        try:
            while sent < 256 * 1024 * 1024 and time.monotonic() - started < 10:
                sock.sendall(b"a" * 65536)
                sent += 65536
                if sent % (1024 * 1024) == 0:
                    began = time.monotonic()
                    assert request(server.http_port, "GET", "/v2/health/live").status == 200
                    slowest = max(slowest, time.monotonic() - began)
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert sent < 32 * 1024 * 1024, "the server kept reading an endless header"
    assert slowest < 1.0


def test_more_headers_than_allowed_are_refused(server: ServerProcess) -> None:
    headers = {f"X-H{i}": "1" for i in range(25)}
    with connect(server.http_port) as sock:
        sock.sendall(head("GET", "/v2/health/live", headers))
        response = read_response(sock)
    assert response.status == 431
    assert response.json() == {"error": "the request has more than 20 headers, the most --http-max-headers allows"}
    headers = {f"X-H{i}": "1" for i in range(18)}  # plus Host
    assert request(server.http_port, "GET", "/v2/health/live", headers=headers).status == 200


def test_headers_that_trickle_in_are_cut_off(server: ServerProcess) -> None:
    """Slowloris: a byte of header now and then, never the end."""
    limit = IDLE_TIMEOUT if _hypercorn(server) else HEADER_TIMEOUT
    with connect(server.http_port) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nX-Slow: ")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < limit + 3:
            try:
                sock.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if closed_by_server(sock, 0.2):
                closed = True
                break
        assert closed
        assert limit - 0.2 < time.monotonic() - started < limit + 2


@UVICORN_ONLY
def test_uvicorn_answers_late_headers_with_408(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\n")
        response = read_response(sock)
    assert response.status == 408
    assert response.json() == {"error": "the request headers did not arrive within 1 s (--http-header-timeout)"}


@pytest.mark.parametrize("path", ["/v2/models/add_sub/infer", "/v2/repository/index"])
def test_a_body_that_stops_arriving_is_answered_408(server: ServerProcess, path: str) -> None:
    with connect(server.http_port) as sock:
        sock.sendall(head("POST", path, {"Content-Length": "100"}) + b'{"inputs":')
        started = time.monotonic()
        response = read_response(sock)
        waited = time.monotonic() - started
        assert closed_by_server(sock, 2)
    assert response.status == 408
    assert response.json() == {"error": "the request body stalled: nothing arrived for 1 s (--http-body-timeout)"}
    assert response.headers["connection"] == "close"
    assert BODY_TIMEOUT - 0.2 < waited < BODY_TIMEOUT + 2


def test_a_slow_but_steady_body_is_served(server: ServerProcess) -> None:
    body = json.dumps(ADD_SUB_JSON).encode()
    with connect(server.http_port) as sock:
        sock.sendall(head("POST", "/v2/models/add_sub/infer", {"Content-Length": str(len(body))}))
        for start in range(0, len(body), len(body) // 4 + 1):  # about 2.5 s in all, pauses under the timeout
            time.sleep(BODY_TIMEOUT / 2)
            sock.sendall(body[start : start + len(body) // 4 + 1])
        assert read_response(sock).status == 200


def test_a_connection_that_sends_nothing_is_closed(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        started = time.monotonic()
        assert closed_by_server(sock, IDLE_TIMEOUT + 3)
        assert time.monotonic() - started > IDLE_TIMEOUT - 0.2


def test_an_idle_keep_alive_connection_is_closed(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        sock.sendall(head("GET", "/v2/health/live"))
        assert read_response(sock).status == 200
        time.sleep(IDLE_TIMEOUT / 2)
        sock.sendall(head("GET", "/v2/health/live"))  # still open within the idle timeout
        assert read_response(sock).status == 200
        started = time.monotonic()
        assert closed_by_server(sock, IDLE_TIMEOUT + 3)
        assert time.monotonic() - started > IDLE_TIMEOUT - 0.2


@UVICORN_ONLY
def test_blank_lines_do_not_keep_a_connection_open(server: ServerProcess) -> None:
    with connect(server.http_port) as sock:
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < IDLE_TIMEOUT + 3:
            try:
                sock.sendall(b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
            closed = closed or closed_by_server(sock, 0.3)
        assert closed


def test_a_server_is_still_reachable_after_the_abuse(server: ServerProcess) -> None:
    sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
    sock.close()
    assert request(server.http_port, "GET", "/v2/health/ready").status == 200


@UVICORN_ONLY
def test_the_metrics_listener_has_the_same_limits(server: ServerProcess) -> None:
    with connect(server.metrics_port) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        assert read_response(sock).status == 408
    with connect(server.metrics_port) as sock:
        sock.sendall(head("GET", "/metrics", {"X-Big": "a" * 8192}))
        assert read_response(sock).status == 431
    with connect(server.metrics_port) as sock:
        assert closed_by_server(sock, IDLE_TIMEOUT + 3)
