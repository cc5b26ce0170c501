"""ModelStreamInfer: many requests on one bidirectional stream, answered as they complete.

Every request is decoded and submitted as it is read and then awaited in its own task. One
writer sends the responses. Models that are not decoupled answer exactly once and, as in
Triton, those answers (and the errors of requests that could not start) go out in request
order; decoupled models' responses go out as produced.
Errors travel in ``error_message`` and the stream goes on, unless the client opened it with the
metadata ``triton_grpc_error: true`` (Triton's strict mode): then a request's failure while it
runs ends the call with the error's status (requests that cannot start still answer in
``error_message``). When the call ends early
(client cancelled, deadline, connection closed) every task is cancelled, which cancels its request.

Flow control (``--grpc-stream-backlog``, :attr:`~naiad.limits.GrpcLimits.stream_backlog`):
responses wait serialized in an outbox of at most ``stream_backlog`` entries (a request whose
response finds it full waits), and the next request is read only while fewer than
``stream_backlog`` requests are in progress or responses unwritten. A client that stops reading
thus stops the server reading its requests, and what the call holds stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from naiad.dataplane import DataPlane, ResponseStream
from naiad.errors import ErrorCode, NaiadError
from naiad.grpc import codec, messages
from naiad.grpc.infer import GrpcRequest, decode
from naiad.grpc.messages import Encoded
from naiad.header_forwarding import with_headers
from naiad.inference import ResponseEvent
from naiad.limits import GrpcLimits
from naiad.logs import log_unexpected
from naiad.protocol import grpc_service_pb2 as pb
from naiad.tracing import FrontendTiming

logger = logging.getLogger(__name__)

Read = Callable[[], Awaitable[object]]
"""The call's next message as bytes, or anything else (``grpc.aio.EOF``) once the client is done."""
Write = Callable[[bytes], Awaitable[None]]


@dataclass(slots=True)
class _Turn:
    """A request's place in the stream's response order."""

    previous: asyncio.Future[None] | None  # resolved once the request before has queued its response
    done: asyncio.Future[None]  # resolved once this request has


@dataclass(slots=True)
class _Timed:
    """A traced request's response and its frontend timing; a None response marks that the request
    has no more (its frontend is done with it once everything before is written)."""

    response: bytes | None
    timing: FrontendTiming


@dataclass(slots=True)
class _Ending:
    """In strict mode, the error that ends the call once everything before it is written."""

    error: NaiadError


_Item = bytes | _Timed | _Ending


class _Outbox:
    """Serialized responses on their way to the client, first in first out; at most ``limit``
    wait, and ``pending`` counts them and the one being written."""

    def __init__(self, limit: int) -> None:
        self._items: deque[_Item] = deque()
        self._limit = limit
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._closed = False
        self.pending = 0

    async def put(self, item: _Item) -> None:
        while len(self._items) >= self._limit:
            self._writable.clear()
            await self._writable.wait()
        self.add(item)

    def add(self, item: _Item) -> None:
        """Queue ``item`` now, beyond the limit if need be (a request's end-of-responses mark)."""
        self._items.append(item)
        self.pending += 1
        self._readable.set()

    def drain(self) -> list[_Item]:
        """What is left unwritten (the call is over)."""
        items, self._items = list(self._items), deque()
        return items

    async def get(self) -> _Item | None:
        """The next response, or None once closed and empty."""
        while not self._items:
            if self._closed:
                return None
            self._readable.clear()
            await self._readable.wait()
        self._writable.set()
        return self._items.popleft()

    def written(self) -> None:
        self.pending -= 1

    def close(self) -> None:
        self._closed = True
        self._readable.set()


class StreamSession:
    """One ModelStreamInfer call; ``on_message`` hears the size of every message read."""

    def __init__(
        self,
        dataplane: DataPlane,
        limits: GrpcLimits,
        on_message: Callable[[int], None],
        end_on_error: Callable[[NaiadError], None] | None = None,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """``end_on_error``: strict mode; it sets the call's status from the error that ends it.
        ``metadata``: the call's, which every request of the stream forwards as its own headers."""
        self._dataplane = dataplane
        self._metadata = metadata
        self._end_on_error = end_on_error
        self._backlog = limits.stream_backlog
        self._max_message_size = limits.max_message_size
        self._on_message = on_message
        self._outbox = _Outbox(limits.stream_backlog)
        self._tasks: set[asyncio.Task[None]] = set()
        self._progress = asyncio.Event()  # set when a task ends or a response has been written
        # Resolved once the latest in-order request has queued its response.
        self._last_turn: asyncio.Future[None] | None = None

    async def run(self, read: Read, write: Write) -> None:
        """Serve the stream until the client stops sending and every request is answered."""
        reader = asyncio.create_task(self._read(read))
        try:
            while True:
                response = await self._outbox.get()
                if response is None:
                    break
                if isinstance(response, _Ending):
                    assert self._end_on_error is not None  # only strict sessions queue one
                    self._end_on_error(response.error)
                    return  # the call ends now: what is still running is cancelled below
                if isinstance(response, _Timed):
                    await _write_timed(write, response)
                else:
                    await write(response)
                del response  # not kept while waiting for the next one
                self._outbox.written()
                self._progress.set()
            await reader
        finally:
            for task in (reader, *self._tasks):
                task.cancel()
            await asyncio.gather(reader, *self._tasks, return_exceptions=True)
            for item in self._outbox.drain():  # traced requests whose answers were never written
                if isinstance(item, _Timed) and item.response is None:
                    item.timing.done()

    async def _read(self, read: Read) -> None:
        try:
            while True:
                while len(self._tasks) + self._outbox.pending >= self._backlog:
                    self._progress.clear()
                    await self._progress.wait()
                wait_start = time.monotonic_ns()
                data = await read()
                if not isinstance(data, bytes):
                    break
                timing = FrontendTiming.start(self._dataplane.service.tracer, "GRPC", wait_start)
                if timing is not None:
                    timing.received()
                self._on_message(len(data))
                self._start(data, timing)
                del data
            while self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            self._outbox.close()

    def _start(self, data: bytes, timing: FrontendTiming | None) -> None:
        """Decode a request (its inputs copied out of ``data``) and submit it, or answer its error."""
        message = pb.ModelInferRequest()
        try:
            received = messages.parse_request(data)
            message = received.message
            request = decode(self._dataplane, received, unary=False)
            del received  # its views of ``data``
            decoded = request.decoded
            stream = self._dataplane.open_stream(
                request.model,
                decoded.inputs,
                outputs=decoded.outputs,
                request_id=decoded.id,
                parameters=with_headers(self._dataplane.grpc_headers, decoded.parameters, self._metadata),
                frontend=timing,
            )
        except NaiadError as error:
            self._refuse(message, error)
        except Exception as exc:  # a bug: answer INTERNAL and keep the stream open
            log_unexpected(
                logger,
                "starting a ModelStreamInfer request for model '%s' version '%s' failed",
                message.model_name,
                message.model_version,
                error=exc,
            )
            self._refuse(message, _internal(exc))
        else:
            traced = timing if timing is not None and timing.trace is not None else None
            self._spawn(self._serve(request, stream, None if request.decoupled else self._take_turn(), traced))

    def _refuse(self, message: pb.ModelInferRequest, error: NaiadError) -> None:
        """Answer a request that could not start: its id and the error, in request order."""
        response = codec.stream_response(codec.bare_response(pb.ModelInferResponse(id=message.id), None), error)
        self._spawn(self._send_in_turn(response.join(), self._take_turn()))

    def _take_turn(self) -> _Turn:
        turn = _Turn(self._last_turn, asyncio.get_running_loop().create_future())
        self._last_turn = turn.done
        return turn

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._progress.set()

    async def _send(self, response: _Item, turn: _Turn | None) -> None:
        """Queue a response; an in-order one waits until the previous in-order one is queued."""
        if turn is not None and turn.previous is not None:
            await turn.previous
        await self._outbox.put(response)

    async def _send_in_turn(self, response: bytes, turn: _Turn) -> None:
        try:
            await self._send(response, turn)
        finally:
            if not turn.done.done():
                turn.done.set_result(None)

    async def _serve(
        self, request: GrpcRequest, stream: ResponseStream, turn: _Turn | None, timing: FrontendTiming | None
    ) -> None:
        """Queue the request's responses as they come (with ``timing``, its trace's frontend timing)."""
        try:
            try:
                events = cast(AsyncGenerator[ResponseEvent, None], stream.events())
                async with contextlib.aclosing(events):
                    async for event in events:
                        failure = event.response.error if event.response is not None else None
                        if failure is not None and self._end_on_error is not None:
                            await self._send(_Ending(failure), turn)
                            return
                        response = self._encode(request, event)
                        if response is not None:
                            await self._send(_with_timing(response, timing), turn)
            except NaiadError as error:
                if self._end_on_error is not None:
                    await self._send(_Ending(error), turn)
                    return
                await self._send(_with_timing(_error_response(request, error), timing), turn)
            except Exception as exc:
                log_unexpected(
                    logger,
                    "ModelStreamInfer request for model '%s' version %d failed",
                    request.model.name,
                    request.model.version,
                    error=exc,
                )
                await self._send(_with_timing(_error_response(request, _internal(exc)), timing), turn)
        finally:
            if timing is not None:
                self._outbox.add(_Timed(None, timing))
            stream.close()  # the task may be cancelled before it iterated at all
            if turn is not None and not turn.done.done():
                turn.done.set_result(None)

    def _encode(self, request: GrpcRequest, event: ResponseEvent) -> bytes | None:
        """The stream message for one event, serialized; an error instead if it is too large."""
        encoded = _stream_response(request, event)
        if encoded is None:
            return None
        try:
            codec.check_size(encoded.size, self._max_message_size)
        except NaiadError as error:
            encoded = codec.stream_response(codec.bare_response(request.bare_response(), event.final), error)
        return encoded.join()


def _stream_response(request: GrpcRequest, event: ResponseEvent) -> Encoded | None:
    """The stream message for one event of a request, or None for a final flag nobody asked to see."""
    if event.response is None:
        if not request.decoupled:
            error = NaiadError(f"model '{request.model.name}' sent a final flag without a response", ErrorCode.INTERNAL)
            return codec.stream_response(codec.bare_response(request.bare_response(), True), error)
        if not request.decoded.enable_empty_final:
            return None
        return codec.stream_response(codec.bare_response(request.bare_response(), True))
    if event.response.error is not None:
        return codec.stream_response(codec.bare_response(request.bare_response(), event.final), event.response.error)
    message = codec.encode_response(
        event.response,
        model_name=request.model.name,
        model_version=str(request.model.version),
        request_id=request.message.id,
        final=event.final,
        in_shared_memory=request.decoded.in_shared_memory,
    )
    return codec.stream_response(message)


def _with_timing(response: bytes, timing: FrontendTiming | None) -> _Item:
    """A response as the outbox takes it: with its request's frontend timing when it is traced."""
    return response if timing is None else _Timed(response, timing)


async def _write_timed(write: Write, item: _Timed) -> None:
    """Write a traced request's response, its frontend timing stamping the write; or, for its
    end-of-responses mark, tell the timing the frontend is done."""
    if item.response is None:
        item.timing.done()
        return
    start = item.timing.sending()
    await write(item.response)
    item.timing.sent(start)


def _error_response(request: GrpcRequest, error: NaiadError) -> bytes:
    return codec.stream_response(codec.bare_response(request.bare_response(), True), error).join()


def _internal(exc: Exception) -> NaiadError:
    return NaiadError(f"internal server error: {type(exc).__name__}: {exc}", ErrorCode.INTERNAL)
