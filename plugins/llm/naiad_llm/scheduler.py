"""The enqueue hook's scheduler: each request flows into the engine as it arrives.

``submit`` (any thread) hands the request to the server loop, where a coroutine parses it, adds it
to the engine's running batch and sends each engine output as a response. Nothing waits for a batch
and no thread is spent per request: the engine batches at the iteration level. A cancelled request
(client gone, call cancelled, deadline passed) is aborted in the engine at once, which frees its slot.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import time

from naiad.backend import (
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    NaiadError,
    Scheduler,
    SchedulerContext,
    unavailable,
)
from naiad_llm.engine import Engine, EngineInfo, GenerationOutput
from naiad_llm.metrics import ModelMetrics, RequestTimer
from naiad_llm.triton_io import accumulate, final_response, parse_request, streamed_response

logger = logging.getLogger(__name__)
STOP_TIMEOUT_S = 60.0


class LLMScheduler(Scheduler):
    """Feeds one model version's engine from the server loop."""

    def __init__(self, context: SchedulerContext, engine: Engine, info: EngineInfo, metrics: ModelMetrics) -> None:
        assert context.server is not None, "an LLM model is served by a running server"
        self._context = context
        self._engine = engine
        self._info = info
        self._metrics = metrics
        self._loop = context.server.loop
        self._lock = threading.Lock()
        self._accepting = False
        self._active = 0
        self._idle = threading.Condition(self._lock)
        self._ids = itertools.count()

    def start(self) -> None:
        with self._lock:
            self._accepting = True

    def submit(self, request: InferenceRequest) -> None:
        with self._lock:
            if not self._accepting:
                raise unavailable(f"model '{self._context.model_name}' is unloading")
            self._active += 1
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
        task = self._loop.create_task(self._serve(request))
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        with self._idle:
            self._active -= 1
            self._idle.notify_all()
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "model '%s': a request failed unexpectedly", self._context.model_name, exc_info=task.exception()
            )

    async def _serve(self, request: InferenceRequest) -> None:
        sender = request.sender
        started = self._context.execution_started([request])
        request_id = f"{self._context.model_name}-{request.id or 'request'}-{next(self._ids)}"
        abort = _Aborter(self._engine, request_id, self._loop)
        request.cancellation.add_callback(abort)
        timer = RequestTimer(time.monotonic())
        last: GenerationOutput | None = None
        try:
            triton = parse_request(request, request_id)
            compute_start = time.monotonic_ns()
            outputs = self._engine.generate(triton.generation)
            try:
                async for output in outputs:
                    self._metrics.tokens(
                        timer, time.monotonic(), len(output.token_ids), last is None, output.num_input_tokens
                    )
                    self._metrics.load(self._engine.stats())
                    last = output
                    if output.finish_reason == "abort" or request.is_cancelled():
                        break
                    if triton.stream:
                        sender.send(streamed_response(triton, output, self._info.tokenizer), final=output.finished)
                    else:
                        accumulate(triton, output)
            finally:
                close = getattr(outputs, "aclose", None)
                if close is not None:
                    await close()  # leaves the engine's batch now, not when the generator is collected
            request.report_compute(compute_start, time.monotonic_ns())
            if request.is_cancelled() or (last is not None and last.finish_reason == "abort"):
                sender.send(
                    InferenceResponse(error=NaiadError("Request was cancelled", ErrorCode.CANCELLED)), final=True
                )
            elif last is None:
                raise NaiadError(f"model '{self._context.model_name}': the engine ended the request without output")
            elif not triton.stream:
                sender.send(final_response(triton, last, self._info.tokenizer), final=True)
            elif not last.finished:
                sender.send(None, final=True)
            if last is not None:
                self._metrics.finished(
                    timer, time.monotonic(), last.num_input_tokens, last.num_output_tokens, triton.generation.sampling.n
                )
        except NaiadError as error:
            if not sender.closed:
                sender.send(InferenceResponse(error=error), final=True)
        except Exception as error:
            logger.exception("model '%s': generating request %s failed", self._context.model_name, request_id)
            if not sender.closed:
                message = f"model '{self._context.model_name}': generation failed: {error}"
                sender.send(InferenceResponse(error=NaiadError(message, ErrorCode.INTERNAL)), final=True)
        finally:
            request.cancellation.remove_callback(abort)
            self._metrics.load(self._engine.stats())
            self._context.execution_ended([request], started)


class _Aborter:
    """A cancellation callback (any thread) that aborts the request in the engine on the server loop."""

    __slots__ = ("_engine", "_loop", "_request_id")

    def __init__(self, engine: Engine, request_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self._request_id = request_id
        self._loop = loop

    def __call__(self) -> None:
        future: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(
            self._engine.abort(self._request_id), self._loop
        )
        future.add_done_callback(self._report)

    def _report(self, future: concurrent.futures.Future[None]) -> None:
        if not future.cancelled() and future.exception() is not None:
            logger.error("aborting request %s failed", self._request_id, exc_info=future.exception())
