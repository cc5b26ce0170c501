"""The enqueue hook's scheduler: each request flows into the engine as it arrives.

``submit`` (any thread) hands the request to the server loop, where it is parsed and handed to the
engine at once (an engine in its own process hears of it before that turn of the loop ends), and a
coroutine sends each engine output as a response. Nothing waits for a batch
and no thread is spent per request: the engine batches at the iteration level. A cancelled request
(client gone, call cancelled, deadline passed) is aborted in the engine at once, which frees its slot;
an engine that has not ended the request's outputs :data:`ABORT_GRACE_S` later is no longer waited
for (its outputs are closed, which ends the request in every engine).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from naiad.backend import (
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    NaiadError,
    Scheduler,
    SchedulerContext,
    unavailable,
)
from naiad_llm.choices import ChoiceOutputs, choice_requests
from naiad_llm.engine import LOAD_REFRESH_S, Engine, EngineInfo
from naiad_llm.metrics import ModelMetrics, RequestTimer
from naiad_llm.triton_io import TritonRequest, final_response, input_tokens, parse_request, streamed_response

logger = logging.getLogger(__name__)
STOP_TIMEOUT_S = 60.0
ABORT_GRACE_S = 2.0  # how long an aborted request's outputs may take to end before they are closed


class LLMScheduler(Scheduler):
    """Feeds one model version's engine from the server loop."""

    def __init__(self, context: SchedulerContext, engine: Engine, info: EngineInfo, metrics: ModelMetrics) -> None:
        assert context.server is not None, "an LLM model is served by a running server"
        self._context = context
        self._engine = engine
        self._info = info
        self._metrics = metrics
        self._loop = context.server.loop
        self._inbox = context.server.inbox
        self._lock = threading.Lock()
        self._accepting = False
        self._active = 0
        self._idle = threading.Condition(self._lock)
        self._ids = itertools.count()
        self._load_read = 0.0
        engine.on_load_change(metrics.load)

    def start(self) -> None:
        with self._lock:
            self._accepting = True

    def submit(self, request: InferenceRequest) -> None:
        with self._lock:
            if not self._accepting:
                raise unavailable(f"model '{self._context.model_name}' is unloading")
            self._active += 1
        if threading.get_ident() == self._inbox.loop_thread:  # a frontend's request: start it a turn sooner
            self._begin(request)
        else:
            self._loop.call_soon_threadsafe(self._begin, request)

    def stop(self) -> None:
        with self._idle:
            self._accepting = False
            if not self._idle.wait_for(lambda: self._active == 0, timeout=STOP_TIMEOUT_S):
                logger.warning(
                    "model '%s': %d requests still generating after %.0f s; unloading anyway",
                    self._context.model_name,
                    self._active,
                    STOP_TIMEOUT_S,
                )

    def _begin(self, request: InferenceRequest) -> None:
        """Parse the request and hand it to the engine now (an engine in its own process hears of it
        before this turn of the loop ends); a task streams its outputs."""
        started = self._context.execution_started([request])
        timer = RequestTimer(time.monotonic())
        request_id = f"{self._context.model_name}-{request.id or 'request'}-{next(self._ids)}"
        opened: _Opened | Exception
        try:
            triton = parse_request(request, request_id)
            requests = choice_requests(triton.generation)
            handed = time.monotonic_ns()
            outputs = ChoiceOutputs(self._engine, requests)
            opened = _Opened(triton, [choice.request_id for choice in requests], outputs, handed)
        except Exception as error:  # answered by the task, as every other failure
            opened = error
        task = self._loop.create_task(self._serve(request, request_id, opened, started, timer))
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        with self._idle:
            self._active -= 1
            self._idle.notify_all()
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "model '%s': a request failed unexpectedly", self._context.model_name, exc_info=task.exception()
            )

    async def _serve(
        self, request: InferenceRequest, request_id: str, opened: _Opened | Exception, started: int, timer: RequestTimer
    ) -> None:
        sender = request.sender
        abort: _Aborter | None = None
        try:
            if isinstance(opened, Exception):
                raise opened
            triton = opened.triton
            task = asyncio.current_task()
            assert task is not None, "a request is served by its task"
            abort = _Aborter(self._engine, opened.request_ids, self._context.model_name, task)
            request.cancellation.add_callback(abort)
            aborted = await self._generate(request, triton, opened.outputs, timer)
            request.report_compute(opened.handed_ns, time.monotonic_ns())
            if aborted or request.is_cancelled():
                sender.send(_cancelled(), final=True)
            elif not triton.started:
                raise NaiadError(f"model '{self._context.model_name}': the engine ended the request without output")
            elif not triton.stream:
                sender.send(final_response(triton, self._info.tokenizer), final=True)
            elif not triton.finished:
                sender.send(None, final=True)
            if triton.started:
                self._metrics.finished(
                    timer, time.monotonic(), input_tokens(triton), triton.output_tokens, len(triton.choices)
                )
        except NaiadError as error:
            if not sender.closed:
                sender.send(InferenceResponse(error=error), final=True)
        except asyncio.CancelledError:  # aborted, and the engine kept its outputs open past the grace
            if not sender.closed:
                sender.send(_cancelled(), final=True)
            raise
        except Exception as error:
            logger.exception("model '%s': generating request %s failed", self._context.model_name, request_id)
            if not sender.closed:
                message = f"model '{self._context.model_name}': generation failed: {error}"
                sender.send(InferenceResponse(error=NaiadError(message, ErrorCode.INTERNAL)), final=True)
        finally:
            if abort is not None:
                request.cancellation.remove_callback(abort)
            try:
                if not isinstance(opened, Exception):
                    await opened.outputs.aclose()  # leaves the engine's batch now, not when it is collected
            finally:  # reported even when the task is cancelled while closing
                self._metrics.load(self._engine.stats())
                self._context.execution_ended([request], started)

    async def _generate(
        self, request: InferenceRequest, triton: TritonRequest, outputs: ChoiceOutputs, timer: RequestTimer
    ) -> bool:
        """Run every choice, streaming each output when asked; whether the engine aborted the request."""
        async for index, output in outputs:
            now = time.monotonic()
            self._metrics.tokens(timer, now, len(output.token_ids), not triton.started, output.num_input_tokens)
            if not triton.started or now - self._load_read >= LOAD_REFRESH_S:  # a request joining counts at once
                self._load_read = now
                self._metrics.load(self._engine.stats())
            if output.finish_reason == "abort":
                return True
            if request.is_cancelled():
                return False
            triton.record(index, output)
            if triton.stream:
                response = streamed_response(triton, index, self._info.tokenizer)
                request.sender.send(response, final=triton.finished)
        return False


def _cancelled() -> InferenceResponse:
    """The final response of a request whose client cancelled it, as Triton words it."""
    return InferenceResponse(error=NaiadError("Request was cancelled", ErrorCode.CANCELLED))


@dataclass(frozen=True, slots=True)
class _Opened:
    """A request handed to the engine: what it asks, its engine requests' ids, their outputs, and
    when it was handed over (``time.monotonic_ns``, where its compute phase starts)."""

    triton: TritonRequest
    request_ids: list[str]
    outputs: ChoiceOutputs
    handed_ns: int


class _Aborter:
    """A cancellation callback (any thread) that aborts a request's engine requests on the server loop,
    and cancels the request's task if the engine has not ended them :data:`ABORT_GRACE_S` later."""

    __slots__ = ("_engine", "_model_name", "_request_ids", "_task")

    def __init__(self, engine: Engine, request_ids: list[str], model_name: str, task: asyncio.Task[Any]) -> None:
        self._engine = engine
        self._request_ids = request_ids
        self._model_name = model_name
        self._task = task

    def __call__(self) -> None:
        loop = self._task.get_loop()
        future: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(self._abort_all(), loop)
        future.add_done_callback(self._report)

    async def _abort_all(self) -> None:
        for request_id in self._request_ids:
            await self._engine.abort(request_id)
        asyncio.get_running_loop().call_later(ABORT_GRACE_S, self._stop_waiting)

    def _stop_waiting(self) -> None:
        if not self._task.done():
            logger.warning(
                "model '%s': the engine did not end request %s within %.0f s of aborting it; closing its outputs",
                self._model_name,
                self._request_ids[0],
                ABORT_GRACE_S,
            )
            self._task.cancel()

    def _report(self, future: concurrent.futures.Future[None]) -> None:
        if not future.cancelled() and future.exception() is not None:
            logger.error("aborting request %s failed", self._request_ids[0], exc_info=future.exception())
