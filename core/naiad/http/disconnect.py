"""Cancelling work whose HTTP client has gone away."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar

from naiad.errors import ErrorCode, NaiadError

if TYPE_CHECKING:
    from naiad.http.direct import DirectChannel

T = TypeVar("T")


async def until_disconnected(
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    work: Coroutine[Any, Any, T],
    channel: DirectChannel | None = None,
) -> T:
    """Await ``work``, cancelling it if the client disconnects first.

    Call this only after the body was read: the ASGI server then answers ``receive()``
    with ``http.disconnect`` once the connection closes (with the request's ``channel``, the
    protocol calls back instead, and no watcher task is needed). Cancellation propagates into the
    data plane, which cancels the request (dropped if queued, flagged if running).
    """
    handler = asyncio.current_task()
    assert handler is not None
    gone = asyncio.Event()

    def disconnected() -> None:
        gone.set()
        handler.cancel()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        disconnected()

    if channel is not None:
        stop_watching = channel.on_disconnect(disconnected)
    else:
        watcher = asyncio.create_task(watch())

        def stop_watching() -> None:
            watcher.cancel()

    try:
        return await work
    except asyncio.CancelledError:
        if not gone.is_set():
            raise
        handler.uncancel()
        raise NaiadError("the client disconnected; the request was cancelled", ErrorCode.CANCELLED) from None
    finally:
        stop_watching()
