"""Framed messages between the server and a worker, on a real Unix socket pair.

A reader takes whatever has arrived in one read, so several messages (some with descriptors) may
come in at once, and a large one over several reads: each must come out whole, in order, with the
descriptors it was sent with and no other.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from naiad_python.isolation.channel import Channel, ChannelClosed


@pytest.fixture
def pair() -> Iterator[tuple[Channel, Channel]]:
    ours, theirs = socket.socketpair()
    sender, receiver = Channel(ours), Channel(theirs)
    yield sender, receiver
    sender.close()
    receiver.close()


def _pipe_with(text: bytes) -> int:
    """A descriptor whose content names it: the read end of a pipe holding ``text``."""
    read_end, write_end = os.pipe()
    os.write(write_end, text)
    os.close(write_end)
    return read_end


def _named(fds: list[int]) -> list[bytes]:
    names = [os.read(fd, 100) for fd in fds]
    for fd in fds:
        os.close(fd)
    return names


def test_messages_sent_together_come_out_one_by_one_each_with_its_descriptors(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    plan = [("a", []), ("b", [b"b0"]), ("c", []), ("d", [b"d0", b"d1"]), ("e", []), ("f", [b"f0"])]
    for op, texts in plan:
        fds = [_pipe_with(text) for text in texts]
        sender.send({"op": op}, fds or None)
        for fd in fds:
            os.close(fd)
    received = []
    for _ in plan:
        message, fds = receiver.receive()
        received.append((message["op"], _named(fds)))
    assert received == plan
    assert not receiver.buffered()


def test_several_small_messages_are_read_at_once_and_then_handed_out_without_reading(
    pair: tuple[Channel, Channel],
) -> None:
    sender, receiver = pair
    for index in range(5):
        sender.send({"op": "ping", "index": index})
    first, _ = receiver.receive()
    assert first["index"] == 0
    assert receiver.buffered()
    receiver.sock.close()  # nothing more can be read: the rest must come from what the first read took
    assert [receiver.receive()[0]["index"] for _ in range(4)] == [1, 2, 3, 4]
    assert not receiver.buffered()


def test_a_message_larger_than_one_read_comes_out_whole_with_its_descriptor(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    text = "x" * (1 << 20)
    fd = _pipe_with(b"big")

    def write() -> None:  # blocks until the reader has drained the socket
        sender.send({"op": "big", "text": text}, [fd])
        os.close(fd)

    writer = threading.Thread(target=write)
    writer.start()
    message, fds = receiver.receive()
    writer.join()
    sender.send({"op": "after"})
    assert message["text"] == text
    assert _named(fds) == [b"big"]
    after, none = receiver.receive()
    assert (after["op"], none) == ("after", [])


def test_the_end_of_the_stream_is_channel_closed(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    sender.send({"op": "last"})
    sender.close()
    assert receiver.receive()[0]["op"] == "last"
    with pytest.raises(ChannelClosed):
        receiver.receive()
