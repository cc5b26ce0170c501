"""One-write responses and disconnect callbacks for the hot path, under uvicorn's protocol.

Through ASGI a response takes two ``send`` calls (head, then body), each its own
``transport.write``, and a disconnect is seen only by a task waiting on ``receive()``. naiad's
protocol (:mod:`naiad.http.connections`) puts a :class:`DirectChannel` in each request's scope
(``scope["extensions"]["naiad.direct"]``): an endpoint writes its whole response with one
``transport.write`` and registers a callback for the loss of the connection. Without the
extension (hypercorn) endpoints use ASGI as before; so does a response the channel declines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

EXTENSION = "naiad.direct"


class _Connection(Protocol):
    """What the channel needs of the protocol: the callbacks it runs when the connection is lost."""

    lost_callbacks: set[Callable[[], None]]


class DirectChannel:
    """A request's way around ASGI to its connection; see the module docstring."""

    __slots__ = ("_connection", "_cycle")

    def __init__(self, connection: _Connection, cycle: Any) -> None:
        self._connection = connection
        self._cycle = cycle  # uvicorn's RequestResponseCycle for this request

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: list[bytes]) -> bool:
        """Write the whole response at once; False (nothing written) when it must go through ASGI:
        a response already begun, a client gone or one that is not reading."""
        cycle = self._cycle
        if cycle.response_started or cycle.disconnected or cycle.flow.write_paused:
            return False
        says_close = False
        parts = [STATUS_LINE[status]]
        for name, value in (*cycle.default_headers, *headers):
            if name == b"connection" and b"close" in value.lower():
                says_close = True
            parts += (name, b": ", value, b"\r\n")
        parts.append(b"content-length: %d\r\n" % sum(map(len, body)))
        if not cycle.keep_alive and not says_close:
            parts.append(b"connection: close\r\n")
        closing = says_close or not cycle.keep_alive
        parts.append(b"\r\n")
        parts += body
        cycle.transport.write(b"".join(parts))
        cycle.response_started = cycle.response_complete = True
        cycle.message_event.set()
        if closing:
            cycle.keep_alive = False
            cycle.transport.close()
        cycle.on_response()
        return True

    def on_disconnect(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` (on the loop) if the connection is lost; returns what unregisters it."""
        if self._cycle.disconnected:
            callback()
            return _nothing
        callbacks = self._connection.lost_callbacks
        callbacks.add(callback)
        return lambda: callbacks.discard(callback)


def channel_of(scope: Any) -> DirectChannel | None:
    """The request's :class:`DirectChannel`, if its server gave it one."""
    extensions = scope.get("extensions")
    return extensions.get(EXTENSION) if extensions else None


def _nothing() -> None:
    return None
