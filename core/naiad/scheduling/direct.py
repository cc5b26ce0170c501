"""The default scheduler: one shared queue, one worker thread per instance, batch of one.

Async instances take their requests on the event loop instead (:mod:`~naiad.scheduling.loop_dispatch`)."""

from __future__ import annotations

import queue
from collections.abc import Sequence

from naiad.contexts import SchedulerContext
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceRequest
from naiad.scheduling.base import Scheduler
from naiad.scheduling.execution import InstanceRunner, answer
from naiad.scheduling.loop_dispatch import LoopDispatch, all_async
from naiad.scheduling.workers import WorkerThreads, unloading_error


class DirectScheduler(Scheduler):
    """Hands each request, in arrival order, to the next free instance (a queued request wakes one)."""

    def __init__(self, context: SchedulerContext) -> None:
        self._name = context.model_name
        self._runners = context.instances
        self._queue: queue.SimpleQueue[InferenceRequest | None] = queue.SimpleQueue()
        self._threads = WorkerThreads()
        self._dispatch = LoopDispatch(self._runners, self._take, lambda: None) if all_async(self._runners) else None
        self._accepting = False

    def start(self) -> None:
        self._accepting = True
        if self._dispatch is not None:
            return
        for runner in self._runners:
            self._threads.spawn(f"naiad-{runner.name}", self._work, runner)

    def submit(self, request: InferenceRequest) -> None:
        if not self._accepting:
            raise unloading_error(self._name)
        self._queue.put(request)
        if self._dispatch is not None:
            self._dispatch.poke()

    def stop(self) -> None:
        self._accepting = False
        if self._dispatch is not None:
            self._dispatch.stop()
        for _ in range(len(self._threads)):
            self._queue.put(None)
        self._threads.join()

    def _work(self, runner: InstanceRunner) -> None:
        while (request := self._next(runner)) is not None:
            if request.is_cancelled():
                answer(request, NaiadError("Request was cancelled", ErrorCode.CANCELLED))
            else:
                runner.execute((request,), keep_turn=True)
            del request  # a finished request's tensors must not wait here for the next one
        runner.end_turn()

    def _next(self, runner: InstanceRunner) -> InferenceRequest | None:
        """The next queued request, or None to stop; the instance's rate-limiter turn ends before it waits."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            runner.end_turn()
            return self._queue.get()

    def _take(self, runner: InstanceRunner, flush: bool) -> Sequence[InferenceRequest] | None:
        """The next request for an idle async instance (on the loop), or None; cancelled ones are answered."""
        while True:
            try:
                request = self._queue.get_nowait()
            except queue.Empty:
                return None
            if request is None:
                continue
            if not request.is_cancelled():
                return (request,)
            answer(request, NaiadError("Request was cancelled", ErrorCode.CANCELLED))
