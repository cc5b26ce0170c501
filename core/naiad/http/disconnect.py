"""Cancelling work whose HTTP client has gone away."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any, TypeVar

from naiad.errors import ErrorCode, NaiadError

T = TypeVar("T")


async def until_disconnected(
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]], work: Coroutine[Any, Any, T]
) -> T:
    """Await ``work``, cancelling it if the client disconnects first.

    Call this only after the body was read: the ASGI server then answers ``receive()``
    with ``http.disconnect`` once the connection closes. Cancellation propagates into the
    data plane, which cancels the request (dropped if queued, flagged if running).
    """
    handler = asyncio.current_task()
    assert handler is not None
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        handler.cancel()

    watcher = asyncio.create_task(watch())
    try:
        return await work
    except asyncio.CancelledError:
        if not gone.is_set():
            raise
        handler.uncancel()
        raise NaiadError("the client disconnected; the request was cancelled", ErrorCode.CANCELLED) from None
    finally:
        watcher.cancel()
