"""Finding 4 on gRPC: connections that never finish connecting, and idle ones, are closed.

Before, the gRPC listener kept a connection that sent nothing for grpc's default 120 s and an
HTTP/2 connection without calls forever, so idle sockets piled up until descriptors ran out. Now
``--grpc-handshake-timeout`` closes a connection that has not sent the HTTP/2 preface and settings
in time (``grpc.server_handshake_timeout_ms``) and ``--grpc-idle-timeout`` one without calls
(``grpc.max_connection_idle_ms``: a GOAWAY, after which grpc clients reconnect on their next call).
``--grpc-max-connections`` closes connections past the cap at once, and the log says so.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tritonclient.grpc import service_pb2

from naiad.grpc.connection_cap import CHECK_INTERVAL_S
from naiad.grpc.serving import limit_options
from naiad.limits import GrpcLimits
from naiad.testing import ServerProcess, start_server

from .grpc_helpers import (
    add_sub_request,
    build_repository,
    channel,
    count_request,
    open_fds,
    raw_infer,
    settles_below,
    stub,
)

HANDSHAKE_S = 1.0
IDLE_S = 2.5
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("grpc-connections") / "models")
    server = start_server([repository], f"--grpc-handshake-timeout={HANDSHAKE_S}", f"--grpc-idle-timeout={IDLE_S}")
    yield server
    server.stop()


def _seconds_until_closed(sock: socket.socket, limit: float = 10.0) -> float:
    """How long until the server closes ``sock`` (whatever it sends first is read and dropped)."""
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open for {limit} s") from None
    return time.monotonic() - started


def _connect(server: ServerProcess, first: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.grpc_port))
    if first:
        sock.sendall(first)
    return sock


def test_the_flags_become_grpc_core_options() -> None:
    options = dict(limit_options(GrpcLimits(idle_timeout_s=2.5, handshake_timeout_s=0.5)))
    assert options["grpc.max_connection_idle_ms"] == 2500
    assert options["grpc.server_handshake_timeout_ms"] == 500


@pytest.mark.parametrize("first", [b"", PREFACE[:10], PREFACE], ids=["silent", "half a preface", "no settings"])
def test_a_connection_that_never_finishes_connecting_is_closed(server: ServerProcess, first: bytes) -> None:
    with _connect(server, first) as sock:
        assert _seconds_until_closed(sock) < HANDSHAKE_S + 1.5


def test_many_silent_connections_give_their_descriptors_back(server: ServerProcess) -> None:
    pid = server.process.pid
    before = open_fds(pid)
    sockets = [_connect(server) for _ in range(200)]
    time.sleep(0.3)
    assert open_fds(pid) >= before + 150  # the server holds them...
    try:
        assert settles_below(lambda: open_fds(pid), before + 2, timeout=HANDSHAKE_S + 3) <= before + 2  # ...briefly
    finally:
        for sock in sockets:
            sock.close()


def test_a_connection_without_calls_is_closed_after_the_idle_timeout(server: ServerProcess) -> None:
    with _connect(server, PREFACE + EMPTY_SETTINGS) as sock:
        waited = _seconds_until_closed(sock)
    assert IDLE_S - 0.5 < waited < IDLE_S + 2.0  # the idle timeout, not the handshake's


def test_a_grpc_client_reconnects_after_an_idle_close(server: ServerProcess) -> None:
    client = stub(server.grpc_url)
    assert client.ServerLive(service_pb2.ServerLiveRequest()).live
    time.sleep(IDLE_S + 1.0)  # the server has sent its GOAWAY
    assert client.ModelInfer(add_sub_request(1.0), timeout=10).raw_output_contents


def test_a_call_longer_than_the_idle_timeout_is_not_cut(server: ServerProcess) -> None:
    started = time.monotonic()
    response = raw_infer(channel(server.grpc_url), count_request(8, model="slow_count", sleep=IDLE_S + 1.0), timeout=30)
    assert time.monotonic() - started > IDLE_S
    assert response.raw_output_contents


def test_connections_beyond_the_cap_are_closed_and_logged(tmp_path: Path) -> None:
    capped = start_server([tmp_path], "--grpc-max-connections=5")
    try:
        sockets = [_connect(capped, PREFACE + EMPTY_SETTINGS) for _ in range(8)]
        try:
            closed = 0
            for sock in sockets:
                sock.settimeout(0.5)
                try:
                    while sock.recv(65536):
                        pass
                    closed += 1
                except ConnectionResetError:
                    closed += 1
                except TimeoutError:
                    pass  # still open
            assert closed == 3
            deadline = time.monotonic() + CHECK_INTERVAL_S + 5
            while "its --grpc-max-connections cap" not in capped.logs() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert f"gRPC on 127.0.0.1:{capped.grpc_port} holds 5 connections, its --grpc-max-connections cap" in (
                capped.logs()
            )
        finally:
            for sock in sockets:
                sock.close()
    finally:
        assert capped.stop() == 0
