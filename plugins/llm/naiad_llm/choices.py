"""``n`` choices for one request: one engine request per choice, their outputs read as they come.

Every engine generates one sequence per request; a request asking for ``n`` choices becomes ``n``
engine requests that share the prompt (engines with prefix caching compute it once). A seeded request
seeds its choices ``seed``, ``seed + 1``, ... so each is reproducible and they differ.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

from naiad_llm.engine import Engine, GenerationOutput, GenerationRequest


def choice_requests(request: GenerationRequest) -> list[GenerationRequest]:
    """The engine requests for ``request``'s choices (``request`` itself when it asks for one)."""
    sampling = request.sampling
    if sampling.n == 1:
        return [request]
    return [
        dataclasses.replace(
            request,
            request_id=f"{request.request_id}/{index}",
            sampling=dataclasses.replace(sampling, n=1, seed=None if sampling.seed is None else sampling.seed + index),
        )
        for index in range(sampling.n)
    ]


class ChoiceOutputs:
    """Each output of every choice's request, with the request's position, in the order they come.

    Made, it asks the engine for every request: an engine that takes a request when asked (the engine
    process) hears of them at once, the others when iteration starts. :meth:`aclose` ends every request
    still generating, whether iteration started or not; so does a request that fails.
    """

    def __init__(self, engine: Engine, requests: Sequence[GenerationRequest]) -> None:
        self._streams = [engine.generate(request) for request in requests]
        self._outputs = _merged(self._streams)

    def __aiter__(self) -> AsyncIterator[tuple[int, GenerationOutput]]:
        return self._outputs

    async def aclose(self) -> None:
        """End every request now (it leaves the engine's batch), not when it is garbage-collected."""
        await self._outputs.aclose()
        for stream in self._streams:
            close: Any = getattr(stream, "aclose", None)
            if close is not None:
                await close()


async def _merged(streams: Sequence[AsyncIterator[GenerationOutput]]) -> AsyncGenerator[tuple[int, GenerationOutput]]:
    if len(streams) == 1:  # the common case, without a task per token
        async for output in streams[0]:
            yield 0, output
        return
    pending: dict[asyncio.Future[GenerationOutput], int] = {}
    try:
        pending = {asyncio.ensure_future(anext(stream)): index for index, stream in enumerate(streams)}
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in sorted(done, key=pending.__getitem__):
                index = pending.pop(future)
                try:
                    output = future.result()
                except StopAsyncIteration:
                    continue
                pending[asyncio.ensure_future(anext(streams[index]))] = index
                yield index, output
    finally:
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
