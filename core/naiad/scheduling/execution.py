"""Running one batch on one instance, with the execution contract, statistics and rate limiting.

Schedulers never call a backend's ``execute`` themselves: each instance comes to them as an
:class:`InstanceRunner`, whose :meth:`~InstanceRunner.execute` (on a worker thread) or
:meth:`~InstanceRunner.execute_async` (on the server's event loop) waits for the instance's
rate-limiter resources, times the execution for the statistics, runs the backend's sync or
``async def execute`` where it belongs, and makes sure no request is left without an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import cast

from naiad.backend_model import ModelInstance
from naiad.contexts import InstanceContext
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceRequest, InferenceResponse
from naiad.scheduling.rate_limiter import RateLimiter, ResourceNeeds
from naiad.sinks import HeldWakeups
from naiad.statistics import ModelStatistics
from naiad.tracing import trace_executed, trace_started

logger = logging.getLogger(__name__)

_now = time.monotonic_ns
_NOT_HELD = contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The rate limiter an instance waits on, and what it needs from it."""

    limiter: RateLimiter
    needs: ResourceNeeds


class InstanceRunner:
    """One instance of a model version, as its scheduler drives it."""

    def __init__(
        self,
        info: InstanceContext,
        instance: ModelInstance,
        *,
        decoupled: bool,
        statistics: ModelStatistics | None = None,
        rate_limit: RateLimit | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.info = info
        self.instance = instance
        self._decoupled = decoupled
        self._statistics = statistics
        self._is_async = inspect.iscoroutinefunction(instance.execute)
        if self._is_async and loop is None:
            raise NaiadError(
                f"instance '{info.name}' of model '{info.model_name}' has an async execute, which needs the "
                "server's event loop, and none was given",
                ErrorCode.INTERNAL,
            )
        self._loop = loop
        self._rate_limit = rate_limit
        self._waiter = rate_limit.limiter.register(rate_limit.needs, info.model_name) if rate_limit else None

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def is_async(self) -> bool:
        """Whether the instance's ``execute`` is a coroutine function, run on the server's loop."""
        return self._is_async

    @property
    def rate_limited(self) -> bool:
        """Whether each batch waits for rate-limiter resources (which only :meth:`execute` does)."""
        return self._rate_limit is not None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server's event loop, which an async instance's ``execute`` runs on (None for others)."""
        return self._loop

    def execute(
        self, requests: Sequence[InferenceRequest], *, keep_turn: bool = False, reschedules: bool = False
    ) -> None:
        """Run one batch to the end of ``execute``; call from a worker thread, never the loop.

        ``reschedules``: the caller runs the requests the backend marked ``rescheduled`` again; without
        it such a request fails with Triton's error.

        ``keep_turn``: the caller looks for the instance's next batch at once, so a rate-limited
        instance keeps its resources until its next ``execute`` competes for them with the instances
        waiting (as Triton re-stages an instance whose model has requests queued), or until
        :meth:`end_turn` says it found no work."""
        limit, waiter = self._rate_limit, self._waiter
        if limit is not None and waiter is not None:
            limit.limiter.acquire(waiter)  # waiting for resources counts as queue time
        try:
            # A non-decoupled batch's responses all reach the event loop with one wake-up, at its end;
            # a batch of one is answered at once (holding it would only delay it).
            with HeldWakeups() if len(requests) > 1 and not self._decoupled else _NOT_HELD:
                start = self._started(requests)
                try:
                    if self._is_async:
                        assert self._loop is not None
                        asyncio.run_coroutine_threadsafe(self._call_async(requests), self._loop).result()
                    else:
                        self.instance.execute(requests)
                except Exception as error:
                    self._failed(requests, error)
                finally:
                    self._ended(requests, start)
                self._answer_forgotten(requests, reschedules)
        finally:
            if limit is not None and waiter is not None:
                limit.limiter.release(waiter, keep=keep_turn)

    def end_turn(self) -> None:
        """The worker that ran ``execute(..., keep_turn=True)`` found no next batch and will wait for one:
        give back the rate-limiter resources it kept. Call before every wait for work."""
        if self._rate_limit is not None and self._waiter is not None:
            self._rate_limit.limiter.end_turn(self._waiter)

    async def execute_async(self, requests: Sequence[InferenceRequest]) -> None:
        """Run one batch on the event loop (async instances only; rate limiting does not apply)."""
        start = self._started(requests)
        try:
            await self._call_async(requests)
        except Exception as error:
            self._failed(requests, error)
        finally:
            self._ended(requests, start)
        self._answer_forgotten(requests, reschedules=False)

    async def _call_async(self, requests: Sequence[InferenceRequest]) -> None:
        await cast(Awaitable[None], self.instance.execute(requests))

    def close(self) -> None:
        """Leave the rate limiter; the instance itself is finalized by the loader."""
        if self._rate_limit is not None and self._waiter is not None:
            self._rate_limit.limiter.unregister(self._waiter)

    def _started(self, requests: Sequence[InferenceRequest]) -> int:
        start = _now()
        if self._statistics is not None:
            self._statistics.started(requests, start)
        trace_started(requests)
        return start

    def _ended(self, requests: Sequence[InferenceRequest], start: int) -> None:
        end = _now()
        if self._statistics is not None:
            self._statistics.executed(requests, start, end)
        trace_executed(requests, start, end)

    def _failed(self, requests: Sequence[InferenceRequest], error: Exception) -> None:
        """An exception escaped ``execute``: fail every request it had not finished."""
        info = self.info
        logger.exception("model '%s' version %s failed to execute a batch", info.model_name, info.version)
        message = error.message if isinstance(error, NaiadError) else f"{type(error).__name__}: {error}"
        code = error.code if isinstance(error, NaiadError) else ErrorCode.INTERNAL
        fail_open(requests, NaiadError(f"failed to execute model '{info.model_name}': {message}", code))

    def _answer_forgotten(self, requests: Sequence[InferenceRequest], reschedules: bool) -> None:
        """A non-decoupled request still open when ``execute`` returns would wait forever: fail it. A
        request marked ``rescheduled`` waits for its next execution where the caller runs one, and
        fails with Triton's error elsewhere."""
        if not reschedules and any(request.rescheduled for request in requests):
            refused = [request for request in requests if request.rescheduled]
            for request in refused:
                request.rescheduled = False
            fail_open(
                refused,
                NaiadError(
                    "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not "
                    "configured to handle such a flag.",
                    ErrorCode.INVALID_ARG,
                ),
            )
        forgotten = [
            request
            for request in requests
            if not request.sender.closed and not request.rescheduled and not request.answered_later
        ]
        if not self._decoupled and forgotten:
            fail_open(
                forgotten,
                NaiadError(
                    f"model '{self.info.model_name}' returned from execute without answering the request",
                    ErrorCode.INTERNAL,
                ),
            )


def fail_open(requests: Sequence[InferenceRequest], error: NaiadError) -> None:
    """Answer every request not yet finished with ``error``."""
    for request in requests:
        answer(request, error)


def answer(request: InferenceRequest, error: NaiadError) -> None:
    """Finish ``request`` with ``error`` unless it is finished already."""
    if not request.sender.closed:
        with contextlib.suppress(NaiadError):  # closed concurrently by a backend thread
            request.sender.send(InferenceResponse(error=error), final=True)
