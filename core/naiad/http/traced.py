"""Starlette endpoints whose answers a traced request's frontend timing records."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from naiad.tracing import FrontendTiming, Tracer

TimedHandler = Callable[[Request, FrontendTiming | None], Awaitable[Response]]
"""An endpoint that also takes its request's frontend timing (None while nothing is traced)."""


def traced_endpoint(tracer: Tracer, handler: TimedHandler) -> Callable[[Request], Awaitable[Response]]:
    """A starlette endpoint running ``handler`` with a frontend timing while tracing is on: the
    response it returns stamps its sending (``HTTP_SEND_START``/``HTTP_SEND_END``), and the timing is
    done once that response is sent, or at once when the handler raises."""

    async def endpoint(request: Request) -> Response:
        timing = FrontendTiming.start(tracer, "HTTP")
        if timing is None:
            return await handler(request, None)
        try:
            response = await handler(request, timing)
        except BaseException:
            timing.done()
            raise
        return _TracedResponse(response, timing)

    return endpoint


class _TracedResponse(Response):
    """``response``, sent with its sending stamped and the frontend then done with the request."""

    def __init__(self, response: Response, timing: FrontendTiming) -> None:  # no body of its own to render
        self._response = response
        self._timing = timing
        self.status_code = response.status_code
        self.background = response.background

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = self._timing.sending()
        try:
            await self._response(scope, receive, send)
            self._timing.sent(start)
        finally:
            self._timing.done()
