"""HTTP plumbing shared by the endpoints: JSON bodies, server-sent events, client disconnects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from naiad_llm.openai.errors import OpenAIError, invalid

T = TypeVar("T")
DONE = b"data: [DONE]\n\n"


async def read_json(request: Request) -> dict[str, Any]:
    """The request body as a JSON object."""
    try:
        body = json.loads(await request.body())
    except ValueError as error:
        raise invalid(f"the request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    return body


def flag(body: dict[str, Any], field: str) -> bool:
    """A boolean field, false when absent or null."""
    value = body.get(field)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(f"'{field}' must be a boolean", field)
    return value


def endpoint(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` with every :class:`OpenAIError` answered in OpenAI's error shape."""

    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except OpenAIError as error:
            return error.response()

    return handle


async def until_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` (the body was read), cancelling it if the client disconnects first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if not task.done() or task.cancelled():
        raise OpenAIError("the client disconnected; the request was cancelled", 499)
    return task.result()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def event_stream(chunks: AsyncIterator[dict[str, Any]], on_close: Callable[[], None]) -> Response:
    """Server-sent events: one ``data:`` line per chunk, then ``[DONE]``; an error ends the stream as an
    error event (OpenAI's clients raise it). ``on_close`` runs when the response ends, however it ends."""

    async def events() -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield _event(chunk)
        except OpenAIError as error:
            yield _event(error.body())
            return
        yield DONE

    return _EventStream(events(), on_close)


class _EventStream(StreamingResponse):
    def __init__(self, events: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(events, media_type="text/event-stream")
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()


def _event(document: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(document, separators=(",", ":")).encode() + b"\n\n"
