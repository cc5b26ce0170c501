"""Stream-cancel races (a Triton advisory class): cancelling ModelStreamInfer while it answers.

A client cancels its stream, or closes its channel, while responses are being produced (a
decoupled model sending from its own thread, requests still being read, the reader paused by
the backlog), many times in a row. The server must not crash, must not leave a request running or a
task waiting (each request is cancelled with its call: the model sees it and stops, and shutdown
finds nothing in flight), must not log a traceback, and must keep serving.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from naiad.testing import ServerProcess, start_server

from .grpc_helpers import add_sub_request, build_repository, proc_status, rss_mib, settles_below, ticks_request

ROUNDS = 20
EXIT_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("grpc-cancel") / "models")
    server = start_server([repository], "--grpc-stream-backlog=4", f"--exit-timeout-secs={EXIT_TIMEOUT_S}")
    yield server
    server.stop()


def _stream(target: grpc.Channel, requests: Iterator[pb.ModelInferRequest]) -> Any:
    return service_pb2_grpc.GRPCInferenceServiceStub(target).ModelStreamInfer(requests, timeout=30)


def _requests(count: int) -> Iterator[pb.ModelInferRequest]:
    for index in range(count):
        yield ticks_request(100_000, 0.0005, request_id=f"t{index}")
        yield add_sub_request(float(index), request_id=f"a{index}")


def _cancel_after_some(url: str) -> None:
    with grpc.insecure_channel(url) as target:
        call = _stream(target, _requests(3))
        for _, _response in zip(range(20), call, strict=False):
            pass
        call.cancel()


def _cancel_at_once(url: str) -> None:
    with grpc.insecure_channel(url) as target:
        call = _stream(target, _requests(3))
        call.cancel()


def _close_the_channel(url: str) -> None:
    target = grpc.insecure_channel(url)
    call = _stream(target, _requests(3))
    for _, _response in zip(range(50), call, strict=False):
        pass
    target.close()


def _cancel_a_paused_stream(url: str) -> None:
    """Many requests, nothing read: the server's reader waits on the backlog when the call ends."""
    with grpc.insecure_channel(url) as target:
        call = _stream(target, _requests(50))
        time.sleep(0.2)
        call.cancel()


RACES: dict[str, Callable[[str], None]] = {
    "cancel after some responses": _cancel_after_some,
    "cancel at once": _cancel_at_once,
    "close the channel": _close_the_channel,
    "cancel a paused stream": _cancel_a_paused_stream,
}


@pytest.mark.parametrize("race", RACES)
def test_cancelling_streams_many_times_leaves_nothing_behind(server: ServerProcess, race: str) -> None:
    pid = server.process.pid
    threads = proc_status(pid, "Threads")
    memory = rss_mib(pid)
    for _ in range(ROUNDS):
        RACES[race](server.grpc_url)
    assert server.process.poll() is None
    # Each request was cancelled: the model noticed and its sending thread ended.
    assert settles_below(lambda: proc_status(pid, "Threads"), threads + 2, timeout=10) <= threads + 2
    assert rss_mib(pid) < memory + 50
    _assert_serving(server)
    for marker in ("Traceback", "Task was destroyed", "never retrieved", "Exception in callback"):
        assert marker not in server.logs()


def test_nothing_is_in_flight_at_shutdown(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Shutdown waits for requests in flight: a leaked one would hold it for the exit timeout."""
    repository = build_repository(tmp_path_factory.mktemp("grpc-cancel-exit") / "models")
    server = start_server([repository], "--grpc-stream-backlog=4", f"--exit-timeout-secs={EXIT_TIMEOUT_S}")
    for race in RACES.values():
        for _ in range(5):
            race(server.grpc_url)
    time.sleep(0.5)
    started = time.monotonic()
    assert server.stop(timeout=EXIT_TIMEOUT_S + 10) == 0
    assert time.monotonic() - started < EXIT_TIMEOUT_S / 2
    assert "Traceback" not in server.logs()


def _assert_serving(server: ServerProcess) -> None:
    with grpc.insecure_channel(server.grpc_url) as target:
        responses = list(_stream(target, iter([ticks_request(3, 0.0, "three"), add_sub_request(1.0, "plain")])))
    assert len(responses) == 4  # three ticks and one answer
