"""Finding 4, connection exhaustion: ``--http-max-connections`` caps open connections per listener.

The probe's 20,000 idle sockets used up the server's file descriptors: every new client was refused
and nothing was logged. Now (a cap of 20 here) a connection beyond the cap is answered 503 with
Triton's error body and closed at once, so descriptors stay bounded, and a warning names the flag, at
most once every 10 s per listener; the metrics listener has the same cap. (uvicorn only: hypercorn
has no connection cap, see naiad.http.serving.)
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from naiad.testing import ServerProcess, start_server

from .http_helpers import build_repository, closed_by_server, connect, head, open_fds, read_response, request

CAP = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("connections") / "models")
    process = start_server([repository], f"--http-max-connections={CAP}", "--http-idle-timeout=30")
    yield process
    process.stop()


def _hold(port: int, count: int, path: str = "/v2/health/live") -> list[socket.socket]:
    """``count`` connections that each made one request and now sit idle, kept open by the server."""
    held = []
    for _ in range(count):
        sock = connect(port)
        sock.sendall(head("GET", path))
        assert read_response(sock).status == 200
        held.append(sock)
    return held


def _refused(port: int) -> None:
    with connect(port) as sock:
        try:
            response = read_response(sock)
        except (ConnectionError, OSError):
            response = None
        if response is not None:
            assert response.status == 503
            assert response.json() == {"error": "the server has too many open connections; try again later"}
            assert response.headers["connection"] == "close"
        assert closed_by_server(sock, 2)


def test_connections_beyond_the_cap_are_refused_and_logged_once(server: ServerProcess) -> None:
    held = _hold(server.http_port, CAP)
    try:
        for _ in range(30):
            _refused(server.http_port)
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert request(server.http_port, "GET", "/v2/health/ready").status == 200  # served again
    lines = [line for line in server.logs().splitlines() if "refused a connection" in line]
    assert len(lines) == 1, lines
    assert "--http-max-connections" in lines[0]
    assert "HTTP on 127.0.0.1" in lines[0]


def test_idle_sockets_cannot_use_up_the_descriptors(server: ServerProcess) -> None:
    before = open_fds(server.process.pid)
    sockets = []
    try:
        for _ in range(500):
            sockets.append(socket.create_connection(("127.0.0.1", server.http_port), timeout=5))
        time.sleep(0.5)
        assert open_fds(server.process.pid) - before <= CAP + 5
    finally:
        for sock in sockets:
            sock.close()


def test_the_metrics_listener_has_the_cap(server: ServerProcess) -> None:
    held = _hold(server.metrics_port, CAP, "/metrics")
    try:
        _refused(server.metrics_port)
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert request(server.metrics_port, "GET", "/metrics").status == 200
    assert any("metrics on 127.0.0.1" in line and "refused a connection" in line for line in server.logs().splitlines())
