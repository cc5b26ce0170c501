"""The dynamic batcher: pools queued requests into batches for a model's instances."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence

from naiad.contexts import SchedulerContext
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceRequest
from naiad.pipeline import ResponseStage
from naiad.protocol.model_config_pb2 import ModelConfig, ModelQueuePolicy
from naiad.scheduling.base import Scheduler
from naiad.scheduling.batch_former import (
    Batch,
    BatchFormer,
    BatchingRules,
    Clock,
    QueuePolicy,
    TimeoutAction,
    timed_out_error,
)
from naiad.scheduling.execution import InstanceRunner, answer
from naiad.scheduling.loop_dispatch import LoopDispatch, all_async
from naiad.scheduling.ordering import OrderedRelease
from naiad.scheduling.start_hold import POLL_S, StartHold
from naiad.scheduling.workers import WorkerThreads, seconds_until, unloading_error

logger = logging.getLogger(__name__)


def rules_from_config(config: ModelConfig) -> BatchingRules:
    """The batching rules of a config's ``dynamic_batching`` section."""
    batching = config.dynamic_batching
    return BatchingRules(
        max_batch_size=config.max_batch_size,
        preferred_batch_sizes=tuple(batching.preferred_batch_size),
        max_queue_delay_us=batching.max_queue_delay_microseconds,
        priority_levels=batching.priority_levels,
        default_priority_level=batching.default_priority_level,
        default_policy=_policy(batching.default_queue_policy),
        level_policies={level: _policy(policy) for level, policy in batching.priority_queue_policy.items()},
        ragged_inputs=frozenset(tensor.name for tensor in config.input if tensor.allow_ragged_batch),
    )


def _policy(policy: ModelQueuePolicy) -> QueuePolicy:
    return QueuePolicy(
        timeout_action=TimeoutAction(policy.timeout_action),
        default_timeout_us=policy.default_timeout_microseconds,
        allow_timeout_override=policy.allow_timeout_override,
        max_queue_size=policy.max_queue_size,
    )


class DynamicScheduler(Scheduler):
    """Worker threads, one per instance, each taking the next batch the former allows.

    A queued request wakes one idle worker; a worker that leaves requests behind wakes the next.
    Async instances get their batches on the event loop instead (:mod:`~naiad.scheduling.loop_dispatch`).
    """

    def __init__(
        self,
        context: SchedulerContext,
        rules: BatchingRules | None = None,
        *,
        clock: Clock = time.monotonic_ns,
    ) -> None:
        config = context.config
        self._name = context.model_name
        self._runners = context.instances
        self._former = BatchFormer(rules or rules_from_config(config), clock)
        self._clock = clock
        self._ordering = OrderedRelease() if config.dynamic_batching.preserve_ordering else None
        lock = threading.Lock()
        self._work_ready = threading.Condition(lock)  # workers: a request arrived or the queue changed
        self._timer = threading.Condition(lock)  # the timeout thread: a deadline may now be due sooner
        self._threads = WorkerThreads()
        self._dispatch = (
            LoopDispatch(self._runners, self._take, self._loop_wakeup) if all_async(self._runners) else None
        )
        self._accepting = False
        self._stopping = False
        self._hold = StartHold(self._name)
        self.batch_sizes: Counter[int] = Counter()  # executed batches by row count

    def stages(self) -> Sequence[ResponseStage]:
        return () if self._ordering is None else (self._ordering,)

    def start(self) -> None:
        self._accepting = True
        if self._dispatch is not None:
            return
        for runner in self._runners:
            self._threads.spawn(f"naiad-{runner.name}", self._work, runner)
        if self._former.has_timeouts:
            self._threads.spawn(f"naiad-{self._name}-timeouts", self._apply_timeouts)

    def submit(self, request: InferenceRequest) -> None:
        with self._work_ready:
            if not self._accepting:
                raise unloading_error(self._name)
            self._former.enqueue(request)
            if self._ordering is not None:
                self._ordering.register(request.sender)
            self._work_ready.notify()
            if self._former.has_timeouts:
                self._timer.notify()
        if self._dispatch is not None:
            self._dispatch.poke()

    def stop(self) -> None:
        with self._work_ready:
            self._accepting = False
            self._stopping = True
            self._work_ready.notify_all()
            self._timer.notify_all()
        if self._dispatch is not None:
            self._dispatch.stop()
        self._threads.join()

    def _work(self, runner: InstanceRunner) -> None:
        while (batch := self._next_batch(runner)) is not None:
            self._log(batch, runner.name)
            runner.execute(batch.requests, keep_turn=True)
            del batch  # a finished batch's tensors must not wait here for the next one
        runner.end_turn()

    def _log(self, batch: Batch, runner: str) -> None:
        self.batch_sizes[batch.size] += 1
        logger.debug(
            "model '%s': executing a batch of %d rows (%d requests) on %s: %s",
            self._name,
            batch.size,
            len(batch.requests),
            runner,
            batch.reason.value,
        )

    def _take(self, runner: InstanceRunner, flush: bool) -> Sequence[InferenceRequest] | None:
        """The next batch for an idle async instance (on the loop), or None."""
        with self._work_ready:
            self._answer_removed()
            if self._held():
                return None
            batch = self._former.next_batch(flush=flush)
        if batch is None:
            return None
        self._log(batch, runner.name)
        return batch.requests

    def _loop_wakeup(self) -> float | None:
        """Answer what timed out or was cancelled in the queue; seconds until the loop must look again."""
        with self._work_ready:
            self._answer_removed()
            return POLL_S if self._held() else self._wait_seconds()

    def _next_batch(self, runner: InstanceRunner) -> Batch | None:
        with self._work_ready:
            while True:
                self._answer_removed()
                if self._held():
                    runner.end_turn()
                    self._work_ready.wait(POLL_S)
                    continue
                batch = self._former.next_batch(flush=self._stopping)
                if batch is not None:
                    if len(self._former):
                        self._work_ready.notify()  # more waits: let another idle worker look
                    return batch
                if self._stopping:
                    return None
                runner.end_turn()
                self._work_ready.wait(self._wait_seconds())

    def _held(self) -> bool:
        """Triton's TRITONSERVER_DELAY_SCHEDULER test hook (lock held)."""
        return bool(self._hold.queued) and not self._stopping and self._hold.holding(len(self._former))

    def _apply_timeouts(self) -> None:
        """Apply queue timeouts on time, even while every instance is busy."""
        with self._timer:
            while not self._stopping:
                self._answer_removed()
                self._timer.wait(self._seconds_until(self._former.next_deadline_ns()))

    def _wait_seconds(self) -> float | None:
        return self._seconds_until(self._former.next_wakeup_ns())

    def _seconds_until(self, moment_ns: int | None) -> float | None:
        return seconds_until(moment_ns, self._clock())

    def _answer_removed(self) -> None:
        for request in self._former.expire():
            answer(request, timed_out_error())
        for request in self._former.drop_cancelled():
            answer(request, NaiadError("Request was cancelled", ErrorCode.CANCELLED))
