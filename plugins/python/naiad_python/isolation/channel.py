"""Framed control messages between the server and a worker: a length, a pickled dict, passed descriptors.

Only control data is pickled (names, shapes, offsets, flags, texts); tensor bytes go through the
arenas. Both ends are this package, with the same interpreter version or newer on the worker side.

Both socket pairs carry messages both ways, and a thread of each process sits in ``receive`` on its
end. A thread blocked in ``recv`` on a Unix socket is woken each time the peer reads what this end
sent (the kernel tells the socket's waiters there is room to write), which costs a context switch per
message for nothing; ``receive`` therefore waits in ``poll`` for data, a wait only data ends.
Then one ``recvmsg`` takes whatever has arrived, most often exactly one message and its descriptors;
what it took beyond a message waits in the channel for the next ``receive`` (``buffered``).
"""

from __future__ import annotations

import contextlib
import pickle
import select
import socket
import struct
import threading
from collections import deque
from typing import Any

_LENGTH = struct.Struct("<I")
_MAX_FDS = 4
_CHUNK = 1 << 16  # bytes one read takes at most: a control message is almost always one read

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
        self._buffer = bytearray()  # read, not yet taken: whole messages and the start of the next
        self._offset = 0  # the stream offset of the buffer's first byte
        # Descriptors received, each with the stream offset at which the read that brought them ended.
        self._descriptors: deque[tuple[int, list[int]]] = deque()

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
        while (taken := self._take()) is None:
            if not readable and self.sock.gettimeout() is None:  # with a timeout, the socket module polls
                self._readable.poll()
            self._read()
        return taken

    def buffered(self) -> bool:
        """True when a whole message has already been read: ``receive`` returns it without reading."""
        return self._message_end() > 0

    def _message_end(self) -> int:
        """Where the buffer's first message ends, or 0 when it is not all there yet."""
        if len(self._buffer) < _LENGTH.size:
            return 0
        end: int = _LENGTH.size + _LENGTH.unpack_from(self._buffer)[0]
        return end if len(self._buffer) >= end else 0

    def _read(self) -> None:
        """One ``recvmsg``: whatever has arrived, up to :data:`_CHUNK` bytes, and its descriptors."""
        try:
            data, fds, _flags, _address = socket.recv_fds(self.sock, _CHUNK, _MAX_FDS)
        except OSError as error:
            raise ChannelClosed(str(error)) from None
        if not data:
            raise ChannelClosed("end of stream")
        self._buffer += data
        if fds:
            self._descriptors.append((self._offset + len(self._buffer), fds))

    def _take(self) -> tuple[Message, list[int]] | None:
        """The first whole message in the buffer and its descriptors, or None.

        A read that brings descriptors ends with the part of the stream they were sent with (the
        kernel stops a read there), and that part begins the message they belong to: so they belong
        to the message in which the read ended.
        """
        end = self._message_end()
        if not end:
            return None
        message: Message = pickle.loads(self._buffer[_LENGTH.size : end])
        del self._buffer[:end]
        self._offset += end
        fds: list[int] = []
        while self._descriptors and self._descriptors[0][0] <= self._offset:
            fds.extend(self._descriptors.popleft()[1])
        return message, fds

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
