"""Request bodies read within ``--http-max-input-size`` and ``--http-body-timeout``, and inflated.

The limits hold while a body arrives, for either HTTP server: a declared ``Content-Length`` over the
limit is refused before a byte is read, a chunked body is counted as it arrives, every wait for the
next piece is bounded, and a compressed body inflates into at most the same number of bytes, off the
event loop. A body refused this way is answered with :class:`BodyError`'s status and the connection
is closed (the rest of the body is never read).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from naiad.errors import ErrorCode, NaiadError, invalid_arg, unsupported
from naiad.http.asgi import Message, Receive

_AUTO_WBITS = 32 + zlib.MAX_WBITS  # a gzip or a zlib header, detected as Triton does
_INFLATE_STEP = 1 << 20
_INLINE_INFLATE = 16 * 1024  # smaller compressed bodies inflate on the event loop (at most ~16 MiB out)


class BodyError(Exception):
    """A request body refused while it was read: answered with ``status``, then the connection closes."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def too_large(size: int, limit: int, what: str = "request body") -> str:
    """Triton's text for a body (``what``: "request JSON" as Triton says it) over the limit."""
    return (
        f"{what} size of {size} bytes exceeds the maximum allowed input size of {limit} bytes. "
        "Use --http-max-input-size to increase the limit."
    )


def raw_too_large(size: int, limit: int) -> str:
    """Triton's text for a raw binary request (``Inference-Header-Content-Length: 0``) over the limit."""
    return (
        f"Raw input has a byte_size ({size} bytes) that exceeds the maximum allowed value of {limit} bytes. "
        "Use --http-max-input-size to increase the limit."
    )


@dataclass(slots=True)
class BodyState:
    """What a request announced about its body and whether it has been read to the end."""

    declared: int | None  # Content-Length, None for a chunked body (or none at all)
    expected: bool  # a body was announced: Content-Length > 0 or a Transfer-Encoding
    complete: bool = False

    @classmethod
    def of(cls, headers: dict[str, str]) -> BodyState:
        """From a request's headers (lower-case names)."""
        length = headers.get("content-length")
        declared = int(length) if length is not None and length.isdigit() else None
        return cls(declared, bool(declared) or "transfer-encoding" in headers)

    @property
    def unread(self) -> bool:
        """Part of an announced body was never read: the connection cannot carry another request."""
        return self.expected and not self.complete


class BodyWatch:
    """Bounds every wait for the next piece of a body (``--http-body-timeout``) with one timer per app.

    A timer per wait would cost several microseconds on every request; here a wait registers itself
    and one periodic check cancels the waits that have lasted too long.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._period = min(1.0, timeout_s / 4)
        self._since: dict[asyncio.Task[Any], float] = {}
        self._stalled: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None

    async def receive(self, receive: Receive) -> Message:
        """``receive()``, or :class:`BodyError` (408) if nothing arrives within the timeout."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        self._since[task] = loop.time()
        if self._timer is None:
            self._timer = loop.call_later(self._period, self._check, loop)
        try:
            return await receive()
        except asyncio.CancelledError:
            if task not in self._stalled:
                raise
            self._stalled.discard(task)
            if task.uncancel() > 0:
                raise
            raise BodyError(
                f"the request body stalled: nothing arrived for {self.timeout_s:g} s (--http-body-timeout)", 408
            ) from None
        finally:
            del self._since[task]
            self._stalled.discard(task)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for task, since in self._since.items():
            if now - since >= self.timeout_s and task not in self._stalled:
                self._stalled.add(task)
                task.cancel()
        self._timer = loop.call_later(self._period, self._check, loop) if self._since else None


async def read_body(
    receive: Receive,
    state: BodyState,
    limit: int,
    watch: BodyWatch,
    refusal: Callable[[int, int], str] = too_large,
) -> bytearray:
    """The whole body in one buffer (allocated once when its length is declared).

    ``refusal(size, limit)`` words the error for a body over ``limit``.
    """
    if state.declared is not None and state.declared > limit:
        raise BodyError(refusal(state.declared, limit))
    buffer = bytearray(state.declared or 0)
    filled = 0
    while not state.complete:
        message = await watch.receive(receive)
        if message["type"] == "http.disconnect":
            raise NaiadError("the client disconnected while sending the request body", ErrorCode.CANCELLED)
        chunk = message.get("body", b"")
        end = filled + len(chunk)
        if end > limit:
            raise BodyError(refusal(end, limit))
        buffer[filled:end] = chunk
        filled = end
        state.complete = not message.get("more_body", False)
    if filled < len(buffer):
        del buffer[filled:]
    return buffer


class LimitedReceive:
    """``receive`` for endpoints that read the body themselves (the starlette routes).

    Until the body's last piece it enforces the size and pause limits (raising :class:`BodyError`);
    after that it passes messages through untouched, so waiting for a disconnect is not timed.
    """

    def __init__(self, receive: Receive, state: BodyState, limit: int, watch: BodyWatch) -> None:
        self._receive = receive
        self._state = state
        self._limit = limit
        self._watch = watch
        self._received = 0

    async def __call__(self) -> Message:
        if self._state.complete:
            return await self._receive()
        message = await self._watch.receive(self._receive)
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            if self._received > self._limit:
                raise BodyError(too_large(self._received, self._limit))
            self._state.complete = not message.get("more_body", False)
        return message


async def decompress(body: bytearray, encoding: str | None, limit: int) -> bytearray:
    """The body inflated (gzip or deflate) into at most ``limit`` bytes; large ones in a worker thread."""
    if encoding is None or encoding == "identity":
        return body
    if encoding not in ("gzip", "deflate"):
        raise unsupported("Unsupported compression type")  # Triton's words; Accept-Encoding names the others
    if not body:
        raise invalid_arg("nothing to be decompressed")
    if len(body) <= _INLINE_INFLATE:
        return _inflate(body, encoding, limit)
    return await asyncio.to_thread(_inflate, body, encoding, limit)


def _inflate(data: bytearray, encoding: str, limit: int) -> bytearray:
    inflater = zlib.decompressobj(_AUTO_WBITS)
    out = bytearray()
    pending: bytes | bytearray = data
    try:
        while True:
            room = min(_INFLATE_STEP, limit + 1 - len(out))
            piece = inflater.decompress(pending, room)
            out += piece
            if len(out) > limit:
                raise invalid_arg(
                    f"Decompressed data size exceeds the maximum allowed value of {limit} bytes. "
                    "Use --http-max-input-size to increase the limit."
                )
            pending = inflater.unconsumed_tail
            if inflater.eof or (not pending and len(piece) < room):
                break
    except zlib.error as error:
        raise invalid_arg(f"failed to decompress the {encoding} request body: {error}") from None
    if not inflater.eof:
        raise invalid_arg(f"failed to decompress the {encoding} request body: incomplete or truncated stream")
    return out
