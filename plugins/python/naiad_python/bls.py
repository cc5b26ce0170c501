"""BLS: ``pb_utils.InferenceRequest.exec()`` and ``async_exec()`` as requests on the model's server.

A BLS request goes through the server's one submit entry point, as a client's request does: it is
validated, scheduled and counted in the callee's statistics, and its tensors pass by reference. It is
a child of the batch the calling ``execute`` serves (:mod:`naiad_python.origin`): cancelled with it,
and refused when it would call a model that is waiting for it. As in Triton, every failure comes
back as an error response, never as an exception; a request the server refuses gets Triton's
``Model <name> - Error when running inference: <reason>`` (a model that is not ready: ``Failed for
execute the inference request. Model '<name>' is not ready.``). Every error a BLS response carries,
the callee's own included, has code INTERNAL, as Triton's python backend gives it.

``timeout`` (microseconds) reaches the callee's request, where its queue policy applies, as in
Triton: it bounds the wait in a queue, not the call. The request's ``parameters`` reach the callee as
they are, also those named like a frontend's reserved ones (``priority``, ``sequence_id``, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque

from naiad.backend import InferenceRequest as CoreRequest
from naiad.backend import NaiadError, ResponseEvent, Scheduling
from naiad_python import convert, origin
from naiad_python.pbutils.caller import calling_unit, server_of
from naiad_python.pbutils.errors import TritonModelException
from naiad_python.pbutils.request import InferenceRequest
from naiad_python.pbutils.response import InferenceResponse
from naiad_python.pbutils.response_iterator import ResponseIterator, ResponseSource


def exec_request(request: InferenceRequest, decoupled: bool) -> InferenceResponse | ResponseIterator:
    """``request.exec(decoupled)``: block until the first response comes."""
    call = _start(request, decoupled, "InferenceRequest.exec()")
    first = call.next_response()
    return ResponseIterator(call, first) if decoupled else first[0]


def async_exec_request(
    request: InferenceRequest, decoupled: bool
) -> asyncio.Future[InferenceResponse | ResponseIterator]:
    """``request.async_exec(decoupled)``: the request is sent at once; the future ends at its first response."""
    loop = asyncio.get_running_loop()  # outside a coroutine: RuntimeError, as in Triton
    call = _start(request, decoupled, "InferenceRequest.async_exec()")
    return loop.create_task(_first_async(call, decoupled))


async def _first_async(call: ResponseSource, decoupled: bool) -> InferenceResponse | ResponseIterator:
    first = await call.next_response_async()
    return ResponseIterator(call, first) if decoupled else first[0]


def _start(request: InferenceRequest, decoupled: bool, api: str) -> ResponseSource:
    """Submit ``request`` on the calling model's server; a refusal becomes an error response."""
    unit = calling_unit(api)
    if not unit.serving:
        raise TritonModelException("BLS is only supported during the 'execute' function.")
    server = server_of(unit, api)
    model = request._model_name
    version = "" if request._model_version == -1 else request._model_version
    events = _Events()
    try:
        core = server.submit(
            model,
            [convert.bls_input(tensor) for tensor in request.inputs()],
            events,
            version=version,
            outputs=request._requested_output_names,
            request_id=request.request_id(),
            parameters=json.loads(request.parameters()),
            scheduling=_scheduling(request),
            refuse_decoupled=None if decoupled else _decoupled_refusal(model),
            parent=origin.current_parent(),
        )
    except NaiadError as error:
        if not server.model_ready(model, version):  # Triton's python backend asks this before anything else
            error = NaiadError(f"Failed for execute the inference request. Model '{model}' is not ready.", error.code)
        prefix = f"Model {model} - Error when running inference: "
        return _Refused(InferenceResponse(error=convert.bls_error(error, prefix)))
    return _Call(core, events)


def _scheduling(request: InferenceRequest) -> Scheduling:
    """The request's sequence and timeout, apart from its parameters (which reach the callee as they are)."""
    return Scheduling(request.correlation_id(), request.flags(), 0, request.timeout())


def _decoupled_refusal(model: str) -> str:
    """Triton's text for ``exec()`` / ``async_exec()`` without ``decoupled=True`` on a decoupled model."""
    return (
        f"Model {model} is using the decoupled. The current BLS request call doesn't support models using the "
        "decoupled transaction policy. Please use 'decoupled=True' argument to the 'exec' or 'async_exec' calls "
        "for decoupled models.'"
    )


class _Events:
    """The response events of one BLS request, taken in order by a thread or a coroutine."""

    __slots__ = ("_changed", "_events", "_waiter")

    def __init__(self) -> None:
        self._events: deque[ResponseEvent] = deque()
        self._changed = threading.Condition(threading.Lock())
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None

    def deliver(self, event: ResponseEvent) -> None:
        with self._changed:
            self._events.append(event)
            self._changed.notify()
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            loop, future = waiter
            with contextlib.suppress(RuntimeError):  # the loop is closed: its model unloaded, nobody waits
                loop.call_soon_threadsafe(_wake, future)

    def take(self) -> ResponseEvent:
        """The next event, waiting for it."""
        with self._changed:
            while not self._events:
                self._changed.wait()
            return self._events.popleft()

    async def take_async(self) -> ResponseEvent:
        """:meth:`take` for a coroutine: waits without blocking its event loop."""
        loop = asyncio.get_running_loop()
        while True:
            with self._changed:
                if self._events:
                    return self._events.popleft()
                future: asyncio.Future[None] = loop.create_future()
                self._waiter = (loop, future)
            await future


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Call:
    """A submitted BLS request: its responses as ``pb_utils`` responses, up to the last one."""

    __slots__ = ("_events", "_request")

    def __init__(self, request: CoreRequest, events: _Events) -> None:
        self._request = request
        self._events = events

    def next_response(self) -> tuple[InferenceResponse, bool]:
        return self._answer(self._events.take())

    async def next_response_async(self) -> tuple[InferenceResponse, bool]:
        try:
            event = await self._events.take_async()
        except asyncio.CancelledError:  # whoever awaited the response gave up on it
            self._request.cancel()
            raise
        return self._answer(event)

    def cancel(self) -> None:
        self._request.cancel()

    @staticmethod
    def _answer(event: ResponseEvent) -> tuple[InferenceResponse, bool]:
        if event.response is None:  # the final flag alone
            return InferenceResponse(), True
        return convert.bls_response(event.response), event.final


class _Refused:
    """A BLS request the server refused: its one response is the error."""

    __slots__ = ("_response",)

    def __init__(self, response: InferenceResponse) -> None:
        self._response = response

    def next_response(self) -> tuple[InferenceResponse, bool]:
        return self._response, True

    async def next_response_async(self) -> tuple[InferenceResponse, bool]:
        return self._response, True

    def cancel(self) -> None:
        """Nothing runs: nothing to cancel."""
