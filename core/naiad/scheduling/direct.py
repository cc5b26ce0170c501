"""The default scheduler: one shared queue, one worker thread per instance, batch of one."""

from __future__ import annotations

import queue

from naiad.contexts import SchedulerContext
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceRequest
from naiad.scheduling.base import Scheduler
from naiad.scheduling.execution import InstanceRunner, answer
from naiad.scheduling.workers import WorkerThreads, unloading_error


class DirectScheduler(Scheduler):
    """Hands each request, in arrival order, to the next free instance (a queued request wakes one)."""

    def __init__(self, context: SchedulerContext) -> None:
        self._name = context.model_name
        self._runners = context.instances
        self._queue: queue.SimpleQueue[InferenceRequest | None] = queue.SimpleQueue()
        self._threads = WorkerThreads()
        self._accepting = False

    def start(self) -> None:
        self._accepting = True
        for runner in self._runners:
            self._threads.spawn(f"naiad-{runner.name}", self._work, runner)

    def submit(self, request: InferenceRequest) -> None:
        if not self._accepting:
            raise unloading_error(self._name)
        self._queue.put(request)

    def stop(self) -> None:
        self._accepting = False
        for _ in range(len(self._threads)):
            self._queue.put(None)
        self._threads.join()

    def _work(self, runner: InstanceRunner) -> None:
        while (request := self._queue.get()) is not None:
            if request.is_cancelled():
                answer(request, NaiadError("Request was cancelled", ErrorCode.CANCELLED))
            else:
                runner.execute((request,))
            del request  # a finished request's tensors must not wait here for the next one
