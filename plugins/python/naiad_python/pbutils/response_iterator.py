"""The responses of a BLS request made with ``exec(decoupled=True)`` / ``async_exec(decoupled=True)``.

As in Triton, the iterator yields every response up to the last one, the one that carried the
final flag; when the model sent that flag alone, the last response is an empty one (no outputs, no
error). Iterating it again after the end replays the responses. ``next()`` blocks until the next
response comes; in an ``async def execute``, ``async for`` waits without blocking the event loop.
``cancel()`` cancels the request; the model decides whether it stops early.
"""

from __future__ import annotations

from typing import Protocol

from naiad_python.pbutils.response import InferenceResponse


class ResponseSource(Protocol):
    """The responses of one request in flight, each with whether it is the last one."""

    def next_response(self) -> tuple[InferenceResponse, bool]: ...

    async def next_response_async(self) -> tuple[InferenceResponse, bool]: ...

    def cancel(self) -> None: ...


class ResponseIterator:
    """Iterates (``for`` or ``async for``) over the responses of a BLS request."""

    __slots__ = ("_finished", "_index", "_responses", "_source")

    def __init__(self, source: ResponseSource, first: tuple[InferenceResponse, bool]) -> None:
        self._source = source
        self._responses: list[InferenceResponse] = []
        self._finished = False
        self._index = 0
        self._record(*first)

    def __iter__(self) -> ResponseIterator:
        self._rewind()
        return self

    def __next__(self) -> InferenceResponse:
        if self._index < len(self._responses):
            return self._take()
        if self._finished:
            raise StopIteration
        self._record(*self._source.next_response())
        return self._take()

    def __aiter__(self) -> ResponseIterator:
        self._rewind()
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._index < len(self._responses):
            return self._take()
        if self._finished:
            raise StopAsyncIteration
        self._record(*await self._source.next_response_async())
        return self._take()

    def cancel(self) -> None:
        """Cancel the request unless its last response already came."""
        if not self._finished:
            self._source.cancel()

    def _record(self, response: InferenceResponse, last: bool) -> None:
        self._responses.append(response)
        self._finished = last

    def _take(self) -> InferenceResponse:
        response = self._responses[self._index]
        self._index += 1
        return response

    def _rewind(self) -> None:
        """After the last response, a new iteration starts from the first one again."""
        if self._finished and self._index >= len(self._responses):
            self._index = 0
