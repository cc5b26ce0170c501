"""Responses as an embedding program receives them: one :class:`Response`, or a stream of them.

Outputs are the tensors the model sent, never copied or re-encoded: ``response["OUT"]`` is the
model's own numpy array. A stream is a request handle too: :meth:`ResponseStream.cancel` cancels
its request from any thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy.typing as npt

from naiad.errors import ErrorCode
from naiad.inference import InferenceRequest, ParameterValue, ResponseEvent
from naiad.sinks import Arrival, BlockingSink, LoopInbox, LoopSink
from naiad.tensor import Tensor


@dataclass(frozen=True, slots=True)
class Response:
    """One response of a model: its output tensors, by name, and its parameters.

    ``response["OUT"]`` (or :attr:`outputs`) gives an output as a numpy array: the array the model
    produced, for host outputs; an output in device memory is copied to the host on each access
    (keep it on the device through :attr:`tensors`, which speak DLPack). ``final`` is set on the
    last response of a request.
    """

    model_name: str
    model_version: int
    tensors: Mapping[str, Tensor]
    parameters: Mapping[str, ParameterValue]
    request_id: str = ""
    final: bool = True

    @property
    def outputs(self) -> dict[str, npt.NDArray[Any]]:
        """Every output as a numpy array."""
        return {name: tensor.numpy() for name, tensor in self.tensors.items()}

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        tensor = self.tensors.get(name)
        if tensor is None:
            raise KeyError(
                f"model '{self.model_name}' sent no output '{name}'; its outputs are {sorted(self.tensors)} "
                "(ask for outputs by name with outputs=[...])"
            )
        return tensor.numpy()


def response_of(request: InferenceRequest, event: ResponseEvent, *, cancelled: bool = False) -> Response | None:
    """The caller's view of one event of ``request``: its error raised, None when it carries no response.

    A CANCELLED error after the caller cancelled the request (``cancelled``) is no error: None.
    """
    answer = event.response
    if answer is None:
        return None
    if answer.error is not None:
        if cancelled and answer.error.code is ErrorCode.CANCELLED:
            return None
        raise answer.error
    return Response(
        request.model_name,
        request.model_version,
        {tensor.name: tensor for tensor in answer.outputs},
        answer.parameters,
        request.id,
        event.final,
    )


class _Stream:
    """What both streams share: the request, its cancellation and whether its final event was read."""

    def __init__(self, request: InferenceRequest) -> None:
        self._request = request
        self._cancelled = False
        self._finished = False

    @property
    def finished(self) -> bool:
        """Whether the request's final response has been read."""
        return self._finished

    def cancel(self) -> None:
        """Cancel the request, from any thread: dropped if still queued, flagged to the model if running.

        Iterating then ends quietly with the responses the model still sends.
        """
        self._cancelled = True
        self._request.cancel()

    def _view(self, event: ResponseEvent) -> Response | None:
        self._finished = event.final
        return response_of(self._request, event, cancelled=self._cancelled)

    def _abandon(self) -> None:
        """The caller stops reading: cancel the request unless it is complete."""
        if not self._finished and not self._request.sender.closed:
            self.cancel()


class ResponseStream(_Stream):
    """The responses of one request, in order, for a thread: ``for response in stream``.

    Iterating ends after the final response; an error response raises
    :class:`~naiad.errors.NaiadError`. Leaving the loop early (``break``, an exception, the end of a
    ``with`` block) cancels the request unless it is complete.
    """

    def __init__(self, request: InferenceRequest, sink: BlockingSink) -> None:
        super().__init__(request)
        self._sink = sink

    def __iter__(self) -> Iterator[Response]:
        try:
            while not self._finished:
                response = self._view(self._sink.next_event())
                if response is not None:
                    yield response
        finally:
            self._abandon()

    def __enter__(self) -> ResponseStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._abandon()


class AsyncResponseStream(_Stream):
    """The responses of one request, in order, for a coroutine: ``async for response in stream``.

    Behaves as :class:`ResponseStream`; the responses are handed to the event loop the stream was
    opened on, whichever loop that is.
    """

    def __init__(self, request: InferenceRequest, sink: LoopSink) -> None:
        super().__init__(request)
        self._sink = sink

    async def _responses(self) -> AsyncIterator[Response]:
        try:
            while not self._finished:
                response = self._view(await self._sink.next_event())
                if response is not None:
                    yield response
        finally:
            self._abandon()

    def __aiter__(self) -> AsyncIterator[Response]:
        return self._responses()

    async def __aenter__(self) -> AsyncResponseStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._abandon()


class CallerInbox(LoopInbox):
    """Hands response events to the caller's event loop; events for a loop closed since are dropped.

    A caller that gave up (its loop ended) must not make the model's sending thread fail, which
    would fail the other requests of its batch.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()
        self.attach(asyncio.get_running_loop())

    def put(self, sink: Arrival, event: ResponseEvent) -> None:
        try:
            super().put(sink, event)
        except RuntimeError:
            if not self.loop.is_closed():
                raise

    def wake(self) -> None:
        try:
            super().wake()
        except RuntimeError:
            if not self.loop.is_closed():
                raise
