"""ASGI type aliases shared by the HTTP frontend's bare endpoints."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from naiad.http.direct import DirectChannel

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON_HEADERS = [(b"content-type", b"application/json")]
TEXT_HEADERS = [(b"content-type", b"text/plain")]
"""Triton's infer answers an unknown model, a decoupled one, and a model's failed response with this
content type, though the body is its JSON error document."""
CLOSE = (b"connection", b"close")


_PIECE = 1 << 20  # a large body goes out in pieces of this size, each sent once the last has drained


async def respond(
    send: Send,
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes | list[bytes | memoryview],
    channel: DirectChannel | None = None,
) -> None:
    """A whole response, its Content-Length added; ``body`` may come in parts (they are sent, not joined).

    With the request's ``channel`` a response of up to a MiB goes out in one write, around ASGI."""
    parts: list[bytes | memoryview] = [body] if isinstance(body, bytes) else body
    length = sum(map(len, parts))
    if channel is not None and length <= _PIECE and channel.respond(status, headers, parts):
        return
    headers = [*headers, (b"content-length", str(length).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    if length <= _PIECE:
        await send({"type": "http.response.body", "body": b"".join(parts) if len(parts) > 1 else parts[0]})
        return
    for part in parts[:-1]:
        await _send_part(send, part, more=True)
    await _send_part(send, parts[-1], more=False)


async def _send_part(send: Send, part: bytes | memoryview, *, more: bool) -> None:
    view = memoryview(part)
    for start in range(0, len(view), _PIECE):
        last = not more and start + _PIECE >= len(view)
        await send({"type": "http.response.body", "body": view[start : start + _PIECE], "more_body": not last})
    if not more and not view:
        await send({"type": "http.response.body", "body": b""})
