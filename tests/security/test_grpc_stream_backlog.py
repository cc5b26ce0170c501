"""``--grpc-stream-backlog``: an unread ModelStreamInfer stream must not queue responses without bound.

Before, every request of a stream was read and answered into an unbounded queue whatever the
client read: 400 requests for 1 MiB answers left 415 MiB in the server while the client read
nothing (issue: +245 MB in 30 s). Now, with ``stream_backlog`` requests in progress or responses
unwritten, the server stops reading the stream until the client reads; a slow reader still gets
every response, in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from naiad.testing import ServerProcess, start_server

from .grpc_helpers import add_sub_request, build_repository, fill_request, rss_mib, stub

BACKLOG = 4
REQUESTS = 300
RESPONSE_KIB = 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = build_repository(tmp_path_factory.mktemp("grpc-backlog") / "models")
    server = start_server([repository], f"--grpc-stream-backlog={BACKLOG}")
    yield server
    server.stop()


class Sender:
    """The requests of one stream, counting how many the client library has taken to send."""

    def __init__(self, count: int, pad: int) -> None:
        self.count, self.pad, self.taken = count, pad, 0

    def __iter__(self) -> Iterator[object]:
        for index in range(self.count):
            self.taken += 1
            yield fill_request(RESPONSE_KIB, self.pad, request_id=str(index))


def test_an_unread_stream_holds_a_bounded_amount(server: ServerProcess) -> None:
    pid = server.process.pid
    before = rss_mib(pid)
    sender = Sender(REQUESTS, pad=512 * 1024)  # 150 MiB in all: far more than HTTP/2 windows hold
    call = stub(server.grpc_url).ModelStreamInfer(iter(sender), timeout=60)
    time.sleep(2.0)  # the client reads nothing
    grown = rss_mib(pid) - before
    # Unbounded, the server would hold the 300 MiB of answers; bounded, the backlog's 4 MiB, what
    # the HTTP/2 windows carry, and the allocator's slack.
    assert grown < 64, f"an unread stream grew the server by {grown:.0f} MiB"
    # The server stopped reading: the client could not send them all (its windows filled up).
    assert sender.taken < REQUESTS, sender.taken
    ids = [response.infer_response.id for response in call]
    assert ids == [str(index) for index in range(REQUESTS)]


def test_a_slow_reader_gets_every_response_in_order(server: ServerProcess) -> None:
    call = stub(server.grpc_url).ModelStreamInfer(iter(Sender(60, pad=0)), timeout=60)
    ids = []
    for response in call:
        assert not response.error_message
        assert len(response.infer_response.raw_output_contents[0]) == RESPONSE_KIB * 1024
        ids.append(response.infer_response.id)
        time.sleep(0.01)
    assert ids == [str(index) for index in range(60)]


def test_a_paused_stream_does_not_hold_up_other_calls(server: ServerProcess) -> None:
    call = stub(server.grpc_url).ModelStreamInfer(iter(Sender(100, pad=0)), timeout=60)
    time.sleep(0.5)  # it is paused now
    started = time.monotonic()
    other = stub(server.grpc_url).ModelInfer(add_sub_request(1.0), timeout=10)
    assert other.raw_output_contents
    assert time.monotonic() - started < 2.0
    drained = threading.Thread(target=lambda: sum(1 for _ in call))
    drained.start()
    drained.join(30)
    assert not drained.is_alive()
