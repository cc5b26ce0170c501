"""Protocol-neutral inference requests, responses and the response sender.

Frontends decode the wire format into an :class:`InferenceRequest`, the scheduler hands
batches of them to a backend instance, and the backend answers each request through its
:class:`ResponseSender`, possibly from another thread and possibly many times (decoupled
models). Tensors are numpy arrays end to end.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy.typing as npt

from naiad.errors import ErrorCode, NaiadError

ParameterValue = str | int | float | bool

# Request flags (``TRITONSERVER_RequestFlag``).
SEQUENCE_START = 1
SEQUENCE_END = 2


@dataclass(slots=True)
class Tensor:
    """A named tensor: a numpy array plus its Triton datatype (wire name, e.g. ``FP32``)."""

    name: str
    datatype: str
    data: npt.NDArray[Any]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(dim) for dim in self.data.shape)


@dataclass(slots=True)
class InferenceResponse:
    """One response: output tensors, or an error, plus optional response parameters."""

    outputs: list[Tensor] = field(default_factory=list)
    error: NaiadError | None = None
    parameters: dict[str, ParameterValue] = field(default_factory=dict)


@dataclass(slots=True)
class ResponseEvent:
    """What a sender delivers: a response (or ``None`` for a flag-only final) and the final flag."""

    response: InferenceResponse | None
    final: bool


class ResponseSender:
    """Delivers a request's responses from any thread to the coroutine waiting for them.

    ``send`` may be called any number of times; the request is complete after the call
    with ``final=True``. Calls after that raise, as in Triton's python backend.
    """

    __slots__ = ("_closed", "_deliver", "_lock", "request")

    def __init__(self, deliver: Callable[[ResponseEvent], None]) -> None:
        self._deliver = deliver
        self._closed = False
        self._lock = threading.Lock()
        self.request: InferenceRequest | None = None

    @property
    def closed(self) -> bool:
        """True once the final flag was sent."""
        return self._closed

    def send(self, response: InferenceResponse | None = None, *, final: bool = False) -> None:
        """Send a response and/or the final flag; thread-safe."""
        with self._lock:
            if self._closed:
                raise NaiadError("Response sender has been closed.", ErrorCode.INTERNAL)
            if response is None and not final:
                raise NaiadError("a response is required unless the final flag is set", ErrorCode.INVALID_ARG)
            if final:
                self._closed = True
        self._deliver(ResponseEvent(response, final))

    def is_cancelled(self) -> bool:
        """True when the client went away or cancelled the request."""
        return self.request is not None and self.request.is_cancelled()

    def relay_through(self, relay: Callable[[ResponseEvent, Callable[[ResponseEvent], None]], None]) -> None:
        """Pass every event through ``relay(event, deliver)`` (e.g. to hold responses back in order)."""
        deliver = self._deliver
        self._deliver = lambda event: relay(event, deliver)


class ResponseStream:
    """The event-loop side of a sender: the events a request produced, awaited in order."""

    __slots__ = ("_events", "_loop", "_waiter", "sender")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._events: deque[ResponseEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.sender = ResponseSender(self._deliver)

    def _deliver(self, event: ResponseEvent) -> None:
        self._loop.call_soon_threadsafe(self._arrive, event)

    def _arrive(self, event: ResponseEvent) -> None:
        self._events.append(event)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next_event(self) -> ResponseEvent:
        """Wait for the next event from the backend."""
        while not self._events:
            self._waiter = self._loop.create_future()
            await self._waiter
        return self._events.popleft()


@dataclass(slots=True, eq=False)
class InferenceRequest:
    """One validated request for one model version.

    ``requested_outputs`` is never empty once the data plane has resolved it: a client
    that asked for no outputs gets every output of the config. ``batch_size`` is the
    request's leading dimension for batching models, else 1.
    """

    model_name: str
    model_version: int
    inputs: dict[str, Tensor]
    requested_outputs: list[str]
    sender: ResponseSender
    id: str = ""
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    correlation_id: int | str = 0
    flags: int = 0
    priority: int = 0
    timeout_us: int = 0
    batch_size: int = 1
    arrival_ns: int = field(default_factory=time.monotonic_ns)
    cancelled: bool = False  # one writer (the event loop), readers on any thread

    def __post_init__(self) -> None:
        self.sender.request = self

    def cancel(self) -> None:
        """Mark the request cancelled; schedulers drop it, running backends may notice."""
        self.cancelled = True

    def is_cancelled(self) -> bool:
        return self.cancelled


def error_response(error: NaiadError) -> InferenceResponse:
    """A response carrying only an error."""
    return InferenceResponse(error=error)
