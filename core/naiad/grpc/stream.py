"""ModelStreamInfer: many requests on one bidirectional stream, answered as they complete.

Every request is decoded and submitted as it is read and then awaited in its own task. One
writer sends the responses. Models that are not decoupled answer exactly once and, as in
Triton, those answers (and the errors of requests that could not start) go out in request
order; decoupled models' responses go out as produced.
Errors never end the stream: they travel in ``error_message``. When the call ends early
(client cancelled, deadline) every task is cancelled, which cancels its request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from naiad.dataplane import DataPlane, ResponseStream
from naiad.errors import ErrorCode, NaiadError
from naiad.grpc import codec
from naiad.grpc.infer import GrpcRequest, decode
from naiad.inference import ResponseEvent
from naiad.protocol import grpc_service_pb2 as pb

logger = logging.getLogger(__name__)

Write = Callable[[pb.ModelStreamInferResponse], Awaitable[None]]


@dataclass(slots=True)
class _Turn:
    """A request's place in the stream's response order."""

    previous: asyncio.Future[None] | None  # resolved once the request before has queued its response
    done: asyncio.Future[None]  # resolved once this request has


class StreamSession:
    """One ModelStreamInfer call."""

    def __init__(self, dataplane: DataPlane) -> None:
        self._dataplane = dataplane
        self._outbox: asyncio.Queue[pb.ModelStreamInferResponse | None] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        # Resolved once the latest in-order request has written its response.
        self._last_turn: asyncio.Future[None] | None = None

    async def run(self, requests: AsyncIterable[pb.ModelInferRequest], write: Write) -> None:
        """Serve the stream until the client stops sending and every request is answered."""
        reader = asyncio.create_task(self._read(requests))
        try:
            while (response := await self._outbox.get()) is not None:
                await write(response)
            await reader
        finally:
            for task in (reader, *self._tasks):
                task.cancel()
            await asyncio.gather(reader, *self._tasks, return_exceptions=True)

    async def _read(self, requests: AsyncIterable[pb.ModelInferRequest]) -> None:
        try:
            async for message in requests:
                self._start(message)
            while self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            self._outbox.put_nowait(None)

    def _start(self, message: pb.ModelInferRequest) -> None:
        try:
            request = decode(self._dataplane, message, unary=False)
            decoded = request.decoded
            stream = self._dataplane.open_stream(
                request.model,
                decoded.inputs,
                outputs=decoded.outputs,
                request_id=decoded.id,
                parameters=decoded.parameters,
            )
        except NaiadError as error:
            self._refuse(message, error)
        except Exception as exc:  # a bug: answer INTERNAL and keep the stream open
            logger.exception(
                "starting a ModelStreamInfer request for model '%s' version '%s' failed",
                message.model_name,
                message.model_version,
                extra={"model": message.model_name},
            )
            self._refuse(message, _internal(exc))
        else:
            self._spawn(self._serve(request, stream, None if request.decoupled else self._take_turn()))

    def _refuse(self, message: pb.ModelInferRequest, error: NaiadError) -> None:
        """Answer a request that could not start: its id and the error, in request order."""
        response = codec.stream_response(pb.ModelInferResponse(id=message.id), error=error)
        self._spawn(self._send_in_turn(response, self._take_turn()))

    def _take_turn(self) -> _Turn:
        turn = _Turn(self._last_turn, asyncio.get_running_loop().create_future())
        self._last_turn = turn.done
        return turn

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(
        self,
        response: pb.ModelStreamInferResponse,
        turn: _Turn | None,
    ) -> None:
        """Queue a response; an in-order one waits until the previous in-order one is queued."""
        if turn is not None and turn.previous is not None:
            await turn.previous
        self._outbox.put_nowait(response)

    async def _send_in_turn(self, response: pb.ModelStreamInferResponse, turn: _Turn) -> None:
        try:
            await self._send(response, turn)
        finally:
            if not turn.done.done():
                turn.done.set_result(None)

    async def _serve(self, request: GrpcRequest, stream: ResponseStream, turn: _Turn | None) -> None:
        try:
            try:
                events = cast(AsyncGenerator[ResponseEvent, None], stream.events())
                async with contextlib.aclosing(events):
                    async for event in events:
                        response = _stream_response(request, event)
                        if response is not None:
                            await self._send(response, turn)
            except NaiadError as error:
                await self._send(codec.stream_response(request.bare_response(), final=True, error=error), turn)
            except Exception as exc:
                logger.exception(
                    "ModelStreamInfer request for model '%s' version %d failed",
                    request.model.name,
                    request.model.version,
                    extra={"model": request.model.name, "version": request.model.version},
                )
                await self._send(codec.stream_response(request.bare_response(), final=True, error=_internal(exc)), turn)
        finally:
            stream.close()  # the task may be cancelled before it iterated at all
            if turn is not None and not turn.done.done():
                turn.done.set_result(None)


def _stream_response(request: GrpcRequest, event: ResponseEvent) -> pb.ModelStreamInferResponse | None:
    """The stream message for one event of a request, or None for a final flag nobody asked to see."""
    if event.response is None:
        if not request.decoupled:
            error = NaiadError(f"model '{request.model.name}' sent a final flag without a response", ErrorCode.INTERNAL)
            return codec.stream_response(request.bare_response(), final=True, error=error)
        if not request.decoded.enable_empty_final:
            return None
        return codec.stream_response(request.bare_response(), final=True)
    if event.response.error is not None:
        return codec.stream_response(request.bare_response(), final=event.final, error=event.response.error)
    message = codec.encode_response(
        event.response,
        model_name=request.model.name,
        model_version=str(request.model.version),
        request_id=request.message.id,
    )
    return codec.stream_response(message, final=event.final)


def _internal(exc: Exception) -> NaiadError:
    return NaiadError(f"internal server error: {type(exc).__name__}: {exc}", ErrorCode.INTERNAL)
