"""The metrics listener: ``GET /metrics`` (and ``/metrics/``) on ``--metrics-port``, in the server's event loop.

Any method but GET is refused (405, whatever the path), as Triton refuses it. A GET of another path
is a 404 (Triton answers an empty 200, which would let a scraper pointed at a wrong path collect
nothing without a sign)."""

from __future__ import annotations

import socket
from typing import Any

from prometheus_client import CollectorRegistry

from naiad.http.asgi import ASGIApp, Receive, Scope, Send
from naiad.http.serving import HttpFrontend
from naiad.limits import HttpLimits
from naiad.metrics.exposition import CONTENT_TYPE, render

_PATHS = ("/metrics", "/metrics/")
_TEXT = [(b"content-type", CONTENT_TYPE.encode())]
_METHOD_NOT_ALLOWED = b'{"error":"Method Not Allowed"}'


def metrics_app(registry: CollectorRegistry) -> ASGIApp:
    """A bare ASGI app: the registry's text on GET of its path, errors in Triton's JSON otherwise."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "GET":
            await _send(send, 405, [(b"content-type", b"text/plain")], _METHOD_NOT_ALLOWED)
        elif scope["path"] in _PATHS:
            await _send(send, 200, _TEXT, render(registry).encode())
        else:
            await _send(send, 404, [(b"content-type", b"application/json")], b'{"error":"Not Found"}')

    return app


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    message: dict[str, Any] = {"type": "http.response.start", "status": status}
    message["headers"] = [*headers, (b"content-length", str(len(body)).encode())]
    await send(message)
    await send({"type": "http.response.body", "body": body})


class MetricsFrontend(HttpFrontend):
    """The metrics listener (uvicorn on its own socket, with the HTTP listener's connection limits)."""

    def __init__(self, registry: CollectorRegistry, sock: socket.socket, limits: HttpLimits | None = None) -> None:
        super().__init__(metrics_app(registry), sock, "uvicorn", limits)
        self._metrics_sock = sock

    def describe(self) -> str:
        host, port = self._metrics_sock.getsockname()[:2]
        return f"metrics on {host}:{port}"
