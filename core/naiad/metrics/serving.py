"""The metrics listener: ``GET /metrics`` (and ``/metrics/``) on ``--metrics-port``, in the server's event loop."""

from __future__ import annotations

import json
import socket
from typing import Any

from prometheus_client import CollectorRegistry

from naiad.http.asgi import ASGIApp, Receive, Scope, Send
from naiad.http.serving import HttpFrontend
from naiad.limits import HttpLimits
from naiad.metrics.exposition import CONTENT_TYPE, render

_PATHS = ("/metrics", "/metrics/")
_JSON = [(b"content-type", b"application/json")]


def metrics_app(registry: CollectorRegistry) -> ASGIApp:
    """A bare ASGI app: the registry's text on GET, Triton's JSON errors otherwise."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] not in _PATHS:
            await _send(send, 404, _JSON, _error("Not Found"))
        elif scope["method"] not in ("GET", "HEAD"):
            await _send(send, 405, _JSON, _error("Method Not Allowed"))
        else:
            body = render(registry).encode()
            await _send(send, 200, [(b"content-type", CONTENT_TYPE.encode())], body, scope["method"] == "HEAD")

    return app


def _error(message: str) -> bytes:
    return json.dumps({"error": message}).encode()


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes, head: bool = False) -> None:
    message: dict[str, Any] = {"type": "http.response.start", "status": status}
    message["headers"] = [*headers, (b"content-length", str(len(body)).encode())]
    await send(message)
    await send({"type": "http.response.body", "body": b"" if head else body})


class MetricsFrontend(HttpFrontend):
    """The metrics listener (uvicorn on its own socket, with the HTTP listener's connection limits)."""

    def __init__(self, registry: CollectorRegistry, sock: socket.socket, limits: HttpLimits | None = None) -> None:
        super().__init__(metrics_app(registry), sock, "uvicorn", limits)
        self._metrics_sock = sock

    def describe(self) -> str:
        host, port = self._metrics_sock.getsockname()[:2]
        return f"metrics on {host}:{port}"
