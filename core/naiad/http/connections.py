"""uvicorn's httptools protocol with naiad's connection limits (``HttpLimits``).

On top of uvicorn it adds, per listener:

- a cap on open connections (``--http-max-connections``): one more is answered 503 and closed at
  once, so idle sockets cannot use up the file descriptors; a warning says so, at most every 10 s;
- caps on header bytes and header count (``--http-max-header-size``, ``--http-max-headers``) and on
  the chunks of one chunked body (Triton's 65,536): 431 (400 for chunks) and the connection closed;
- a deadline for a request's headers from its first byte (``--http-header-timeout``): 408 and
  closed; a new connection that sends nothing is idle (``--http-idle-timeout``), as is one between
  requests;
- a graceful close of idle connections at shutdown: the write side is shut and what arrives is read
  and dropped for a moment, so a request that crossed the close sees the connection end, not a reset.

Plain inference requests are answered by :mod:`naiad.http.infer_lane` without ASGI.

Malformed requests get uvicorn's 400 as before, logged at debug level only (a client cannot fill the
log with them). The body's size and pauses are the app's to bound (:mod:`naiad.http.body`), for both
HTTP servers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from naiad.http.direct import EXTENSION, DirectChannel
from naiad.http.infer_lane import FastInfer, InferLane
from naiad.http.json_body import dump_json
from naiad.limits import HttpLimits

logger = logging.getLogger(__name__)

MAX_CHUNKS = 1 << 16
"""Triton's ``kMaxChunkedChunks``: non-empty chunks one chunked request body may have."""

_LINGER_S = 1.0  # how long a connection closed at shutdown keeps reading before it is closed
_WARNING_INTERVAL_S = 10.0


class RefusalLog:
    """The warning for connections refused at the cap: at most one every 10 s per listener."""

    def __init__(self, listener: str) -> None:
        self._listener = listener
        self._lock = threading.Lock()
        self._last = -_WARNING_INTERVAL_S
        self._quiet = 0

    def refused(self, limit: int) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < _WARNING_INTERVAL_S:
                self._quiet += 1
                return
            self._last, quiet, self._quiet = now, self._quiet, 0
        logger.warning(
            "%s refused a connection: %d connections are open, the most --http-max-connections allows; raise it, "
            "or find the clients that hold connections open (%d more refused since the last message)",
            self._listener,
            limit,
            quiet,
        )


def too_many_headers(limit: int) -> str:
    return f"the request has more than {limit} headers, the most --http-max-headers allows"


def headers_too_large(limit: int) -> str:
    return f"the request headers exceed {limit} bytes, the most --http-max-header-size allows"


def error_response(status: int, message: str) -> bytes:
    """A complete HTTP/1.1 response with Triton's error body that closes the connection."""
    body = dump_json({"error": message})
    head = b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    return STATUS_LINE[status] + head + body


class _Refused(Exception):
    """Raised in a parser callback to stop parsing a request that broke a limit."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's protocol with the limits above; :func:`limited_protocol` binds it to one listener."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    refusals: ClassVar[RefusalLog] = RefusalLog("HTTP")
    infer_lane: ClassVar[InferLane | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A body sent with both Content-Length and Transfer-Encoding: chunked is read chunked, the
        # length ignored (RFC 9112 6.3), as Triton reads it; httptools refuses such requests otherwise.
        self.parser.set_dangerous_leniencies(lenient_chunked_length=True)
        self.timeout_keep_alive = self.limits.idle_timeout_s  # type: ignore[assignment]  # any number of seconds
        self._turned_away = False  # refused at the connection cap
        self._lingering = False  # closing at shutdown: read and drop what arrives
        self._in_headers = False
        self._began = 0.0  # when the request being parsed began
        self._header_bytes = 0  # bytes received in later reads while the headers were still incomplete
        self._header_size = 0  # bytes of the URL, names and values parsed so far
        self._header_count = 0
        self.header_names: list[bytes] = []  # the request's header names as sent (uvicorn lower-cases them)
        self._codings: list[bytes] = []  # the request's Transfer-Encoding values
        self._chunks = 0
        self._refusal: tuple[int, str] | None = None
        self._header_timer: asyncio.TimerHandle | None = None
        self.lost_callbacks: set[Callable[[], None]] = set()  # see naiad.http.direct

    # -- connections ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self._turned_away = True
            self.transport = transport
            self.refusals.refused(self.limits.max_connections)
            transport.write(error_response(503, "the server has too many open connections; try again later"))
            transport.close()
            return
        super().connection_made(transport)
        # A new connection is idle until a request begins (bytes that begin none, blank lines, do not count).
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        if self._turned_away:
            return
        super().connection_lost(exc)
        for callback in list(self.lost_callbacks):
            callback()
        self.lost_callbacks.clear()

    def shutdown(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            super().shutdown()  # the request in progress finishes, then the connection closes
            return
        self._lingering = True
        self._unset_keepalive_if_required()
        self._cancel_header_timer()
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(_LINGER_S, self.transport.close)
        else:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._turned_away or self._lingering:
            return
        continuing = self._in_headers
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse(*self._refusal)
            else:  # a client's malformed request: worth a debug line, not a warning per request
                message = "Invalid HTTP request received."
                logger.debug("closing a connection: %s", message)
                self.send_400_response(message)
            return
        if not self._in_headers:
            return
        if continuing:  # this whole read was header bytes
            self._header_bytes += len(data)
            if self._header_bytes > self.limits.max_header_size:
                self._refuse(431, headers_too_large(self.limits.max_header_size))
                return
        if self._header_timer is None:  # armed only for headers that take more than one read
            self._header_timer = self.loop.call_at(self._began + self.limits.header_timeout_s, self._headers_late)

    # -- parser callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._unset_keepalive_if_required()
        self._cancel_header_timer()
        super().on_message_begin()
        self._in_headers = True
        self._began = self.loop.time()
        self._header_bytes = self._header_size = self._header_count = self._chunks = 0
        self.header_names = []
        self._codings = []

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count_header_bytes(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._stop(431, too_many_headers(self.limits.max_headers))
        self._count_header_bytes(len(name) + len(value) + 4)
        self.header_names.append(name)
        if len(name) == 17 and name.lower() == b"transfer-encoding":
            self._codings.append(value)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._cancel_header_timer()
        self._unset_keepalive_if_required()  # set when the previous response ended during these headers
        if self._codings and b",".join(self._codings).rsplit(b",", 1)[-1].strip().lower() != b"chunked":
            # The parser's leniency (see __init__) would read such a body until the connection closes.
            self._stop(
                400,
                "the request's Transfer-Encoding does not end with 'chunked', so the length of its body is "
                "unknown; send the body chunked, or with Content-Length and no Transfer-Encoding",
            )
        lane = self.infer_lane
        if (
            lane is not None
            and (self.cycle is None or self.cycle.response_complete)
            and not self.pipeline
            and self.parser.get_method() == b"POST"
        ):
            fast = lane.take(self, self.url, self.headers)
            if fast is not None:
                self.cycle = fast  # type: ignore[assignment]  # it answers what the protocol asks of a cycle
                return
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:  # a request, not a protocol upgrade
            extensions: dict[str, Any] = {
                **self.scope.get("extensions", {}),
                EXTENSION: DirectChannel(self.lost_callbacks, cycle, self.header_names),
            }
            self.scope["extensions"] = extensions  # ASGI lets servers add their own

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_body(self, body: bytes) -> None:
        if self._chunks > MAX_CHUNKS:
            self._stop(
                400,
                f"Chunked request body exceeds maximum of {MAX_CHUNKS} non-empty chunks. "
                "Send fewer or larger HTTP chunks.",
            )
        cycle = self.cycle
        if isinstance(cycle, FastInfer):
            if not cycle.response_complete:
                cycle.feed(body)
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if isinstance(cycle, FastInfer):
            if not cycle.response_complete:
                cycle.complete()
            return
        super().on_message_complete()

    # -- refusals ------------------------------------------------------------------------------

    def _count_header_bytes(self, size: int) -> None:
        self._header_size += size
        if self._header_size > self.limits.max_header_size:
            self._stop(431, headers_too_large(self.limits.max_header_size))

    def _stop(self, status: int, message: str) -> None:
        """Stop parsing: ``data_received`` answers with ``status`` and closes."""
        self._refusal = (status, message)
        raise _Refused(message)

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._in_headers and not self.transport.is_closing():
            timeout = self.limits.header_timeout_s
            self._refuse(408, f"the request headers did not arrive within {timeout:g} s (--http-header-timeout)")

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` in place of the app (unless its response has begun) and close."""
        logger.debug("closing a connection: %s", message)
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if cycle.response_started or self._in_headers:  # no room for an answer of ours
                self.transport.close()
                return
            cycle.disconnected = True  # the app's receive() now says http.disconnect, its answer goes nowhere
            cycle.message_event.set()
        self.transport.write(error_response(status, message))
        self.transport.close()

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None


def limited_protocol(
    limits: HttpLimits, listener: str, infer_lane: InferLane | None = None
) -> type[LimitedHttpToolsProtocol]:
    """The protocol class for one listener (``listener`` names it in the refusal warning), answering
    plain inference requests itself when given an ``infer_lane``."""
    return type(
        "LimitedHttpToolsProtocol",
        (LimitedHttpToolsProtocol,),
        {"limits": limits, "refusals": RefusalLog(listener), "infer_lane": infer_lane},
    )
