"""Starlette responses whose sending a traced request's frontend timing records."""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from naiad.tracing import FrontendTiming


class TracedResponse(Response):
    """``response``, sent with its sending stamped (``HTTP_SEND_START``/``HTTP_SEND_END``) and the
    frontend then done with the request, sent or not."""

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


def traced(response: Response, timing: FrontendTiming | None) -> Response:
    """``response``, its sending recorded by ``timing`` when there is one."""
    return response if timing is None else TracedResponse(response, timing)
