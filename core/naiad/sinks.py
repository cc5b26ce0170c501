"""Response sinks: where a submitted request's responses go.

A sink's ``deliver(event)`` is called on whatever thread sent the response (a worker thread, a
backend's own thread, the event loop for async instances). Three kinds cover every caller:

* :class:`LoopSink` for coroutines on an event loop (the frontends). Events from other threads
  reach the loop through its :class:`LoopInbox`, which wakes the loop once for every burst of
  events, however many requests of a batch they answer.
* :class:`BlockingSink` for a thread that waits (a backend calling another model from ``execute``).
* :class:`CallbackSink` for code that reacts on the sending thread itself (a pipeline step feeding
  the next model without a loop hop).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceResponse, ResponseEvent

_holding = threading.local()  # .inboxes: the inboxes this thread owes a wake-up, while it holds them


class HeldWakeups:
    """Deliveries this thread makes inside the block wake each event loop once, when the block ends.

    The instance runner holds them around a non-decoupled batch of several requests, so its responses
    reach the loop with one wake-up however many requests it answers.
    """

    __slots__ = ("_inboxes",)

    def __enter__(self) -> None:
        self._inboxes: set[LoopInbox] | None = None
        if getattr(_holding, "inboxes", None) is None:  # else already held further up this thread
            self._inboxes = _holding.inboxes = set()

    def __exit__(self, *exc: object) -> None:
        inboxes = self._inboxes
        if inboxes is not None:
            _holding.inboxes = None
            for inbox in inboxes:
                inbox.wake()


class Arrival(Protocol):
    """What a :class:`LoopInbox` hands events to, on its loop (a :class:`LoopSink`, or a frontend's own)."""

    def arrive(self, event: ResponseEvent) -> None: ...


class LoopInbox:
    """Carries events from any thread to one event loop: one wake-up per burst, not per event.

    :meth:`attach` it to its loop, on the loop's own thread, before use. Events sent on that thread
    are handed over at once; others wait in the inbox until the loop drains it.
    """

    __slots__ = ("_lock", "_loop", "_pending", "_scheduled", "loop_thread")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread = -1
        self._pending: list[tuple[Arrival, ResponseEvent]] = []
        self._scheduled = False  # a drain is scheduled on the loop
        self._lock = threading.Lock()

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve ``loop``; call on the thread that runs it."""
        self._loop = loop
        self.loop_thread = threading.get_ident()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the server's event loop is not running yet")
        return self._loop

    def put(self, sink: Arrival, event: ResponseEvent) -> None:
        if threading.get_ident() == self.loop_thread:
            sink.arrive(event)
            return
        with self._lock:
            self._pending.append((sink, event))
            if self._scheduled:
                return  # the scheduled drain takes this event too
            held: set[LoopInbox] | None = getattr(_holding, "inboxes", None)
            if held is not None:
                held.add(self)  # woken when the thread's hold ends
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._drain)

    def wake(self) -> None:
        """Schedule a drain for events waiting in the inbox, unless one is scheduled."""
        with self._lock:
            if self._scheduled or not self._pending:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            self._scheduled = False
        for sink, event in pending:
            sink.arrive(event)


class LoopSink:
    """The events of one request, awaited in order by a coroutine on the inbox's loop."""

    __slots__ = ("_events", "_inbox", "_waiter")

    def __init__(self, inbox: LoopInbox) -> None:
        self._inbox = inbox
        self._events: deque[ResponseEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def deliver(self, event: ResponseEvent) -> None:
        self._inbox.put(self, event)

    def arrive(self, event: ResponseEvent) -> None:
        """Called on the loop: queue the event and wake the waiting coroutine."""
        self._events.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_event(self) -> ResponseEvent:
        """Wait for the next event."""
        while not self._events:
            self._waiter = self._inbox.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._events.popleft()

    async def events(self) -> AsyncIterator[ResponseEvent]:
        """Every event up to and including the final one."""
        while True:
            event = await self.next_event()
            yield event
            if event.final:
                return


class BlockingSink:
    """The events of one request, for a thread that blocks until they come."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: queue.SimpleQueue[ResponseEvent] = queue.SimpleQueue()

    def deliver(self, event: ResponseEvent) -> None:
        self._events.put(event)

    def next_event(self, timeout: float | None = None) -> ResponseEvent:
        """The next event; raises UNAVAILABLE after ``timeout`` seconds without one."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            raise NaiadError(f"no response within {timeout} s", ErrorCode.UNAVAILABLE) from None

    def response(self, timeout: float | None = None, *, model: str = "") -> InferenceResponse:
        """The single response of a non-decoupled request of ``model``; its error, if any, is raised."""
        return single_response(self.next_event(timeout), model)


class CallbackSink:
    """Calls ``callback(event)`` on the sending thread; the callback must not block."""

    __slots__ = ("deliver",)

    def __init__(self, callback: Callable[[ResponseEvent], None]) -> None:
        self.deliver = callback


def single_response(event: ResponseEvent, model: str = "") -> InferenceResponse:
    """The response a non-decoupled request's only event carries; its error is raised."""
    if event.response is None:
        raise NaiadError(f"model '{model}' sent a final flag without a response", ErrorCode.INTERNAL)
    if event.response.error is not None:
        raise event.response.error
    return event.response
