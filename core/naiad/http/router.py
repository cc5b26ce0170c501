"""The HTTP application's front door: restricted APIs, body limits and connection reuse for every endpoint.

POSTs to an infer path go straight to :func:`naiad.http.infer.serve_infer`; everything else to the
starlette app, with its body read through :class:`~naiad.http.body.LimitedReceive`. A response
closes its connection when the server is shutting down or when part of the request body could not
be read (over the limits, or stalled); a body an endpoint left unread is read to its end first.
"""

from __future__ import annotations

import logging

from naiad.dataplane import DataPlane, ServerState
from naiad.http.asgi import CLOSE, JSON_HEADERS, ASGIApp, Message, Receive, Scope, Send, respond
from naiad.http.body import BodyError, BodyState, BodyWatch, LimitedReceive, too_large
from naiad.http.infer import INFER_PATH, error_body, serve_infer
from naiad.http.infer_lane import InferLane
from naiad.http.restricted import refusal
from naiad.limits import HttpLimits
from naiad.logs import log_unexpected
from naiad.restrictions import Restrictions

logger = logging.getLogger(__name__)

_RESTRICTED_HEADERS = [(b"content-type", b"text/plain")]  # what Triton 2.51 sends with its 403


class HttpRouter:
    """The ASGI app of the HTTP listener."""

    def __init__(self, dataplane: DataPlane, fallback: ASGIApp, limits: HttpLimits, restrictions: Restrictions) -> None:
        self._dataplane = dataplane
        self._fallback = fallback
        self._limits = limits
        self._restrictions = restrictions
        self._watch = BodyWatch(limits.body_timeout_s)

    def infer_lane(self) -> InferLane | None:
        """The fast lane for plain inference requests (:mod:`naiad.http.infer_lane`); none while an API
        is restricted (those checks stay here)."""
        return None if self._restrictions.groups else InferLane(self._dataplane, self._limits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._fallback(scope, receive, send)
            return
        if self._restrictions.groups:
            forbidden = refusal(scope["path"], scope["headers"], self._restrictions)
            if forbidden is not None:  # the body, if any, is not read: the connection cannot be reused
                closing = BodyState.of(_headers(scope)).expected
                await respond(send, 403, [*_RESTRICTED_HEADERS, CLOSE] if closing else _RESTRICTED_HEADERS, forbidden)
                return
        if scope["method"] == "POST":
            match = INFER_PATH.fullmatch(scope["path"])
            if match is not None:
                model, version = match["model"], match["version"] or ""
                await serve_infer(self._dataplane, self._limits, self._watch, scope, receive, send, model, version)
                return
        await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The starlette app, its body within the limits; an error it did not answer is answered here."""
        state = BodyState.of(_headers(scope))
        limit = self._limits.max_input_size
        if state.declared is not None and state.declared > limit:
            await respond(send, 400, [*JSON_HEADERS, CLOSE], error_body(too_large(state.declared, limit)))
            return
        started = False
        limited = LimitedReceive(receive, state, limit, self._watch)

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                # a body the endpoint left unread (an unknown path, a wrong method) is read to its end,
                # within the limits, so the connection serves the next request, as Triton's does
                if (state.unread and not await _drained(limited, state)) or (
                    self._dataplane.state is ServerState.EXITING
                ):
                    message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        try:
            await self._fallback(scope, limited, guarded_send)
        except Exception as error:
            if started:  # starlette's error handler answered (and logged) it, then raised it again
                return
            log_unexpected(logger, "unexpected error serving %s %s", scope["method"], scope["path"], error=error)
            body = error_body(f"internal server error: {type(error).__name__}: {error}")
            await respond(send, 500, [*JSON_HEADERS, CLOSE], body)


async def _drained(receive: LimitedReceive, state: BodyState) -> bool:
    """Whether the rest of the body could be read (not over the limits, no disconnect)."""
    try:
        while not state.complete:
            if (await receive())["type"] == "http.disconnect":
                return False
    except BodyError:
        return False
    return True


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
