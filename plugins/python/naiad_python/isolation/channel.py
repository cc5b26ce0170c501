"""Framed control messages between the server and a worker: a length, a pickled dict, passed descriptors.

Only control data is pickled (names, shapes, offsets, flags, texts); tensor bytes go through the
arenas. Both ends are this package, with the same interpreter version or newer on the worker side.

Both socket pairs carry messages both ways, and a thread of each process sits in ``receive`` on its
end. A thread blocked in ``recv`` on a Unix socket is woken each time the peer reads what this end
sent (the kernel tells the socket's waiters there is room to write), which costs a context switch per
message for nothing; ``receive`` therefore waits in ``poll`` for data, a wait only data ends.
"""

from __future__ import annotations

import contextlib
import pickle
import select
import socket
import struct
import threading
from typing import Any

_LENGTH = struct.Struct("<I")
_MAX_FDS = 4

Message = dict[str, Any]


class ChannelClosed(Exception):
    """The other end went away."""


class Channel:
    """One end of the socket pair; ``send`` is safe from any thread, ``receive`` from one reader."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()
        self._readable = select.poll()
        self._readable.register(sock, select.POLLIN)

    def send(self, message: Message, fds: list[int] | None = None) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        data = _LENGTH.pack(len(payload)) + payload
        with self._send_lock:
            try:
                if fds:
                    sent = socket.send_fds(self.sock, [data], fds)
                    if sent < len(data):
                        self.sock.sendall(data[sent:])
                else:
                    self.sock.sendall(data)
            except OSError as error:
                raise ChannelClosed(str(error)) from None

    def receive(self, *, readable: bool = False) -> tuple[Message, list[int]]:
        """The next message and the descriptors that came with it (``ChannelClosed`` at the end).

        ``readable``: the caller knows data is waiting (an event loop said so), so nothing is waited for.
        """
        try:
            if not readable and self.sock.gettimeout() is None:  # with a timeout, the socket module polls
                self._readable.poll()
            head, fds, _flags, _address = socket.recv_fds(self.sock, _LENGTH.size, _MAX_FDS)
        except OSError as error:
            raise ChannelClosed(str(error)) from None
        if not head:
            raise ChannelClosed("end of stream")
        head += self._exactly(_LENGTH.size - len(head))
        (length,) = _LENGTH.unpack(head)
        message: Message = pickle.loads(self._exactly(length))
        return message, fds

    def _exactly(self, count: int) -> bytes:
        chunks = []
        while count:
            try:
                chunk = self.sock.recv(min(count, 1 << 20))
            except OSError as error:
                raise ChannelClosed(str(error)) from None
            if not chunk:
                raise ChannelClosed("end of stream")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
