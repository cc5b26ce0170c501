"""The infer fast lane: plain inference requests answered by naiad's HTTP protocol itself, without ASGI.

naiad's uvicorn protocol (:mod:`naiad.http.connections`) hands a request to :class:`InferLane` when it
is of the simplest kind: ``POST /v2/models/{m}[/versions/{v}]/infer`` over HTTP/1.1 with a
``Content-Length`` of at most 1 MiB (and within ``--http-max-input-size``), no ``Content-Encoding``,
``Transfer-Encoding``, ``Expect`` or ``Upgrade``, no restricted API configured, and no earlier request
of the connection still being answered. The body is gathered into one buffer as it arrives; once it is
complete the request is decoded and queued on the spot, and the response is encoded and written with
one ``transport.write`` when the model answers. No task, no ASGI messages, no second copy of the body.

Every other request goes through the ASGI app, whose infer endpoint (:mod:`naiad.http.infer`) answers
the same way (same texts, statuses and headers); so does every request under hypercorn.
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from naiad.dataplane import DataPlane, ServerState
from naiad.errors import NaiadError
from naiad.header_forwarding import with_headers
from naiad.http import codec
from naiad.http.asgi import CLOSE, JSON_HEADERS, TEXT_HEADERS
from naiad.http.direct import response_bytes, sent_headers
from naiad.http.infer import DECOUPLED_ON_HTTP, encoded_answer, error_body, header_length
from naiad.http.status import http_status
from naiad.inference import InferenceRequest, ResponseEvent
from naiad.limits import HttpLimits
from naiad.logs import log_unexpected
from naiad.sinks import single_response
from naiad.tracing import FrontendTiming

if TYPE_CHECKING:
    from naiad.http.connections import LimitedHttpToolsProtocol

logger = logging.getLogger("naiad.http.infer")  # the ASGI path's logger: one place to look

LARGEST_BODY = 1 << 20
"""Larger bodies take the ASGI path, which sends large responses in pieces as the client reads them."""

_DISQUALIFYING = frozenset((b"content-encoding", b"transfer-encoding", b"expect", b"upgrade"))
# INFER_PATH without a query, escapes or bytes beyond ASCII (those take the ASGI path)
_PLAIN_URL = re.compile(rb"/v2/models/(?P<model>[^/?#%\x80-\xff]+)(?:/versions/(?P<version>[0-9]+))?/infer")


class InferLane:
    """Takes the plain infer requests of one HTTP listener; see the module docstring."""

    def __init__(self, dataplane: DataPlane, limits: HttpLimits) -> None:
        self.dataplane = dataplane
        self.limits = limits
        self._largest = min(LARGEST_BODY, limits.max_input_size)

    def take(
        self, protocol: LimitedHttpToolsProtocol, url: bytes, headers: Sequence[tuple[bytes, bytes]]
    ) -> FastInfer | None:
        """A request to answer here, or None when it must go through ASGI."""
        match = _PLAIN_URL.fullmatch(url)
        if match is None or protocol.parser.get_http_version() != "1.1":
            return None
        length = -1
        fields: dict[bytes, bytes] = {}
        for name, value in headers:
            if name in _DISQUALIFYING:
                return None
            if name == b"content-length":
                if not value.isdigit() or length >= 0:
                    return None
                length = int(value)
            else:
                fields[name] = value
        if not 0 <= length <= self._largest:
            return None
        model, version = match["model"].decode("ascii"), (match["version"] or b"").decode("ascii")
        sent = (protocol.header_names, headers) if self.dataplane.http_headers else None
        fast = FastInfer(self, protocol, model, version, length, fields, sent)
        fast.keep_alive = protocol.parser.should_keep_alive()
        return fast


class FastInfer:
    """One request on the fast lane, standing in for uvicorn's request-response cycle.

    The protocol reads ``response_started``, ``response_complete``, ``disconnected`` and
    ``keep_alive`` as it does a cycle's, and calls ``message_event.set()`` when the connection is lost
    (``message_event`` is this object: :meth:`set` cancels the request then). It refers to the protocol
    weakly, so that a finished request is freed by reference counting alone.
    """

    __slots__ = (
        "_body",
        "_decoded",
        "_fields",
        "_filled",
        "_lane",
        "_model",
        "_protocol",
        "_request",
        "_sent",
        "_serving",
        "_timer",
        "_timing",
        "_version",
        "disconnected",
        "keep_alive",
        "response_complete",
        "response_started",
    )

    def __init__(
        self,
        lane: InferLane,
        protocol: LimitedHttpToolsProtocol,
        model: str,
        version: str,
        length: int,
        fields: dict[bytes, bytes],
        sent: tuple[Sequence[bytes], Sequence[tuple[bytes, bytes]]] | None,
    ) -> None:
        self._lane = lane
        self._protocol = weakref.ref(protocol)
        self._model = model
        self._version = version
        self._fields = fields  # by lower-case name
        self._sent = sent  # names as sent, and the headers: kept only when a forward pattern needs them
        self._body = bytearray(length)
        self._filled = 0
        self._request: InferenceRequest | None = None
        self._serving: Any = None  # the model version the request went to
        self._decoded: codec.DecodedRequest | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timing = FrontendTiming.start(lane.dataplane.service.tracer, "HTTP")
        self.response_started = self.response_complete = self.disconnected = False
        self.keep_alive = True
        if length:
            self._timer = protocol.loop.call_later(lane.limits.body_timeout_s, self._stalled)

    @property
    def message_event(self) -> FastInfer:
        return self

    # -- the body ----------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        """More of the body arrived (httptools never passes more than the Content-Length)."""
        end = self._filled + len(chunk)
        self._body[self._filled : end] = chunk
        self._filled = end
        if self._timer is not None:
            self._cancel_timer()
            protocol = self._protocol()
            if end < len(self._body) and protocol is not None:
                self._timer = protocol.loop.call_later(self._lane.limits.body_timeout_s, self._stalled)

    def _stalled(self) -> None:
        self._timer = None
        timeout = self._lane.limits.body_timeout_s
        message = f"the request body stalled: nothing arrived for {timeout:g} s (--http-body-timeout)"
        self._respond(408, [*JSON_HEADERS, CLOSE], [error_body(message)])

    # -- the request -------------------------------------------------------------------------------

    def complete(self) -> None:
        """The whole body is here: decode and queue the request, or answer its error."""
        self._cancel_timer()
        if self._timing is not None:
            self._timing.received()
        lane = self._lane
        dataplane = lane.dataplane
        try:
            self._serving = model = dataplane.service.resolve(
                self._model, self._version, refuse_decoupled=DECOUPLED_ON_HTTP
            )
        except NaiadError as error:
            self._fail(error, TEXT_HEADERS)
            return
        try:
            length = header_length(_text(self._fields.get(b"inference-header-content-length")))
            decoded = codec.decode_request(
                self._body, length, self._model, model.signature, lane.limits.max_input_size, dataplane.shared_memory
            )
            self._body = bytearray()  # the tensors hold views of it
            self._decoded = decoded
            dataplane.enter()
            try:
                self._request = dataplane.service.submit(
                    model,
                    decoded.inputs,
                    self,
                    outputs=decoded.outputs,
                    request_id=decoded.id,
                    parameters=with_headers(dataplane.http_headers, decoded.parameters, self._header_texts()),
                    frontend=self._timing,
                )
            except BaseException:
                dataplane.leave()
                raise
        except Exception as error:
            self._fail(error)
            return
        decoded.inputs = []  # the request holds them; the response needs only the rest

    def deliver(self, event: ResponseEvent) -> None:
        """The model's response, from any thread."""
        self._lane.dataplane.inbox.put(self, event)

    def arrive(self, event: ResponseEvent) -> None:
        """The model's response, on the event loop: encode it and write it."""
        self._lane.dataplane.leave()
        self._request = None
        if self.disconnected:
            self._timing_done()
            return
        model, decoded = self._serving, self._decoded
        assert decoded is not None
        try:  # the model's failure, or an answer that cannot be written: text/plain, as Triton answers them
            response = single_response(event, model.name)
            headers, payload = encoded_answer(
                response, model, decoded, _text(self._fields.get(b"accept-encoding")) or ""
            )
        except Exception as error:
            self._fail(error, TEXT_HEADERS)
            return
        self._respond(200, headers, payload)

    def set(self) -> None:
        """The connection was lost (uvicorn's protocol says so through ``message_event``)."""
        self._cancel_timer()
        if self.disconnected and self._request is not None:
            self._request.cancel()

    # -- answering ---------------------------------------------------------------------------------

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _header_texts(self) -> Iterator[tuple[str, str]]:
        """The request's headers as text, names as the client sent them, read only when a forward pattern
        asks for them."""
        return sent_headers(*self._sent) if self._sent is not None else iter(())

    def _fail(self, error: Exception, headers: list[tuple[bytes, bytes]] = JSON_HEADERS) -> None:
        """Answer the request's error (with ``headers``); a failure of naiad's own is logged and
        answered 500, as the ASGI path does."""
        if isinstance(error, NaiadError):
            self._respond(http_status(error.code), headers, [error_body(error.message)])
            return
        log_unexpected(
            logger,
            "unexpected error serving an inference request for model '%s' version '%s'",
            self._model,
            self._version,
            error=error,
        )
        message = f"internal server error: {type(error).__name__}: {error}"
        self._respond(500, JSON_HEADERS, [error_body(message)])

    def _timing_done(self) -> None:
        if self._timing is not None:
            self._timing.done()
            self._timing = None

    def _respond(self, status: int, headers: list[tuple[bytes, bytes]], body: list[bytes | memoryview]) -> None:
        protocol = self._protocol()
        if self.response_started or self.disconnected or protocol is None:
            self._timing_done()
            return
        if self._lane.dataplane.state is ServerState.EXITING:
            headers = [*headers, CLOSE]
        defaults = protocol.server_state.default_headers
        data, closing = response_bytes(status, headers, body, defaults, self.keep_alive)
        # The protocol keeps this object until the connection's next request: keep nothing of this one
        # (its tensors, the shared-memory windows it used).
        self._decoded = self._request = self._serving = None
        self._body = bytearray()
        transport = protocol.transport
        sending = self._timing.sending() if self._timing is not None else 0
        transport.write(data)
        if self._timing is not None:
            self._timing.sent(sending)
            self._timing_done()
        self.response_started = self.response_complete = True
        if closing:
            self.keep_alive = False
            transport.close()
        protocol.on_response_complete()


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
