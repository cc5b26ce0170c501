"""The dynamic batcher: pools queued requests into batches for a model's instances."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence

from naiad.backend import ModelInstance
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceRequest, InferenceResponse
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
from naiad.scheduling.execution import execute_batch
from naiad.scheduling.ordering import OrderedRelease
from naiad.scheduling.workers import WorkerThreads, unloading_error

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
    """Worker threads, one per instance, each taking the next batch the former allows."""

    def __init__(
        self,
        name: str,
        instances: Sequence[tuple[str, ModelInstance]],
        rules: BatchingRules,
        *,
        decoupled: bool,
        preserve_ordering: bool = False,
        clock: Clock = time.monotonic_ns,
    ) -> None:
        self._name = name
        self._instances = list(instances)
        self._decoupled = decoupled
        self._former = BatchFormer(rules, clock)
        self._clock = clock
        self._ordering = OrderedRelease() if preserve_ordering else None
        self._condition = threading.Condition()
        self._threads = WorkerThreads()
        self._accepting = False
        self._stopping = False
        self.batch_sizes: Counter[int] = Counter()  # executed batches by row count

    def start(self) -> None:
        self._accepting = True
        for instance_name, instance in self._instances:
            self._threads.spawn(f"naiad-{instance_name}", self._work, instance, instance_name)
        if self._former.has_timeouts:
            self._threads.spawn(f"naiad-{self._name}-timeouts", self._apply_timeouts)

    def submit(self, request: InferenceRequest) -> None:
        with self._condition:
            if not self._accepting:
                raise unloading_error(self._name)
            self._former.enqueue(request)
            if self._ordering is not None:
                self._ordering.register(request.sender)
            self._condition.notify_all()

    def stop(self) -> None:
        with self._condition:
            self._accepting = False
            self._stopping = True
            self._condition.notify_all()
        self._threads.join()

    def _work(self, instance: ModelInstance, instance_name: str) -> None:
        while (batch := self._next_batch()) is not None:
            self.batch_sizes[batch.size] += 1
            logger.debug(
                "model '%s': executing a batch of %d rows (%d requests) on %s: %s",
                self._name,
                batch.size,
                len(batch.requests),
                instance_name,
                batch.reason.value,
            )
            execute_batch(instance, batch.requests, decoupled=self._decoupled)

    def _next_batch(self) -> Batch | None:
        with self._condition:
            while True:
                self._answer_removed()
                batch = self._former.next_batch(flush=self._stopping)
                if batch is not None:
                    return batch
                if self._stopping:
                    return None
                self._condition.wait(self._wait_seconds())

    def _apply_timeouts(self) -> None:
        """Apply queue timeouts on time, even while every instance is busy."""
        with self._condition:
            while not self._stopping:
                self._answer_removed()
                self._condition.wait(self._seconds_until(self._former.next_deadline_ns()))

    def _wait_seconds(self) -> float | None:
        return self._seconds_until(self._former.next_wakeup_ns())

    def _seconds_until(self, moment_ns: int | None) -> float | None:
        if moment_ns is None:
            return None
        return max(moment_ns - self._clock(), 0) / 1e9

    def _answer_removed(self) -> None:
        for request in self._former.expire():
            request.sender.send(InferenceResponse(error=timed_out_error()), final=True)
        for request in self._former.drop_cancelled():
            request.sender.send(
                InferenceResponse(error=NaiadError("Request was cancelled", ErrorCode.CANCELLED)), final=True
            )
