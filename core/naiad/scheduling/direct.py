"""The default scheduler: one shared queue, one worker thread per instance, batch of one."""

from __future__ import annotations

import queue
from collections.abc import Sequence

from naiad.backend import ModelInstance
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceRequest, InferenceResponse
from naiad.scheduling.base import Scheduler
from naiad.scheduling.execution import execute_batch
from naiad.scheduling.workers import WorkerThreads, unloading_error


class DirectScheduler(Scheduler):
    """Hands each request, in arrival order, to the next free instance."""

    def __init__(self, name: str, instances: Sequence[tuple[str, ModelInstance]], *, decoupled: bool) -> None:
        self._name = name
        self._instances = list(instances)
        self._decoupled = decoupled
        self._queue: queue.SimpleQueue[InferenceRequest | None] = queue.SimpleQueue()
        self._threads = WorkerThreads()
        self._accepting = False

    def start(self) -> None:
        self._accepting = True
        for instance_name, instance in self._instances:
            self._threads.spawn(f"naiad-{instance_name}", self._work, instance)

    def submit(self, request: InferenceRequest) -> None:
        if not self._accepting:
            raise unloading_error(self._name)
        self._queue.put(request)

    def stop(self) -> None:
        self._accepting = False
        for _ in range(len(self._threads)):
            self._queue.put(None)
        self._threads.join()

    def _work(self, instance: ModelInstance) -> None:
        while (request := self._queue.get()) is not None:
            if request.is_cancelled():
                request.sender.send(
                    InferenceResponse(error=NaiadError("Request was cancelled", ErrorCode.CANCELLED)),
                    final=True,
                )
                continue
            execute_batch(instance, (request,), decoupled=self._decoupled)
