"""One-write responses and disconnect callbacks for the hot path, under uvicorn's protocol.

Through ASGI a response takes two ``send`` calls (head, then body), each its own
``transport.write``, and a disconnect is seen only by a task waiting on ``receive()``. naiad's
protocol (:mod:`naiad.http.connections`) puts a :class:`DirectChannel` in each request's scope
(``scope["extensions"]["naiad.direct"]``): an endpoint writes its whole response with one
``transport.write`` and registers a callback for the loss of the connection. Without the
extension (hypercorn) endpoints use ASGI as before; so does a response the channel declines.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

EXTENSION = "naiad.direct"


class DirectChannel:
    """A request's way around ASGI to its connection; see the module docstring.

    The channel lives in its request's scope, which uvicorn's cycle holds: it refers to the cycle
    weakly, and to the connection only through its set of loss callbacks, so no reference cycle forms.
    """

    __slots__ = ("_cycle", "_lost_callbacks", "header_names")

    def __init__(self, lost_callbacks: set[Callable[[], None]], cycle: Any, header_names: Sequence[bytes]) -> None:
        self._lost_callbacks = lost_callbacks  # the connection's; it runs them when it is lost
        self._cycle = weakref.ref(cycle)  # uvicorn's RequestResponseCycle for this request
        self.header_names = header_names  # as the client sent them, in the order of the scope's headers

    def sent_headers(self, headers: Sequence[tuple[bytes, bytes]]) -> Iterator[tuple[str, str]]:
        """The scope's ``headers`` as :func:`sent_headers` gives them."""
        return sent_headers(self.header_names, headers)

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: list[bytes | memoryview]) -> bool:
        """Write the whole response at once; False (nothing written) when it must go through ASGI:
        a response already begun, a client gone or one that is not reading."""
        cycle = self._cycle()
        if cycle is None or cycle.response_started or cycle.disconnected or cycle.flow.write_paused:
            return False
        data, closing = response_bytes(status, headers, body, cycle.default_headers, cycle.keep_alive)
        cycle.transport.write(data)
        cycle.response_started = cycle.response_complete = True
        cycle.message_event.set()
        if closing:
            cycle.keep_alive = False
            cycle.transport.close()
        cycle.on_response()
        return True

    def on_disconnect(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` (on the loop) if the connection is lost; returns what unregisters it."""
        cycle = self._cycle()
        if cycle is None or cycle.disconnected:
            callback()
            return _nothing
        callbacks = self._lost_callbacks
        callbacks.add(callback)
        return lambda: callbacks.discard(callback)


def response_bytes(
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: list[bytes | memoryview],
    default_headers: list[tuple[bytes, bytes]],
    keep_alive: bool,
) -> tuple[bytes, bool]:
    """A whole HTTP/1.1 response with its Content-Length, and whether the connection closes after it
    (the response or its headers say so)."""
    says_close = False
    parts: list[bytes | memoryview] = [STATUS_LINE[status]]
    for name, value in (*default_headers, *headers):
        if name == b"connection" and b"close" in value.lower():
            says_close = True
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"content-length: %d\r\n" % sum(map(len, body)))
    if not keep_alive and not says_close:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    parts += body
    return b"".join(parts), says_close or not keep_alive


def sent_headers(names: Sequence[bytes], headers: Sequence[tuple[bytes, bytes]]) -> Iterator[tuple[str, str]]:
    """A request's ``headers`` (lower-case names, as uvicorn gives them) as text, each name in the case
    the client sent it (``names``, in the same order), as Triton forwards headers."""
    for name, (_, value) in zip(names, headers, strict=False):
        yield name.decode("latin-1"), value.decode("latin-1")


def channel_of(scope: Any) -> DirectChannel | None:
    """The request's :class:`DirectChannel`, if its server gave it one."""
    extensions = scope.get("extensions")
    return extensions.get(EXTENSION) if extensions else None


def _nothing() -> None:
    return None
