"""Deciding when queued requests form a batch: Triton's dynamic-batching rules, clock injected.

This class holds no threads and never sleeps: the scheduler asks it for the next batch and
for the moment it should ask again, and it answers from the queues and the injected clock.
That makes every rule testable deterministically.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from naiad.errors import NaiadError, request_prefix, unavailable
from naiad.inference import InferenceRequest

Clock = Callable[[], int]  # monotonic nanoseconds

_NS_PER_US = 1_000


class CloseReason(enum.Enum):
    """Why a batch was sent when it was (logged at --log-verbose 1)."""

    MAX_SIZE = "max batch size reached"
    PREFERRED_SIZE = "preferred batch size reached"
    QUEUE_DELAY = "queue delay expired"
    SHAPE_CHANGE = "next request has different shapes"
    NO_BATCHING = "model does not batch"
    FLUSH = "flushing the queue"


class TimeoutAction(enum.Enum):
    REJECT = 0
    DELAY = 1


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """One priority level's ``ModelQueuePolicy``."""

    timeout_action: TimeoutAction = TimeoutAction.REJECT
    default_timeout_us: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0

    def timeout_us(self, requested_us: int) -> int:
        """The queue timeout for a request asking for ``requested_us`` (0 = none)."""
        if (
            requested_us
            and self.allow_timeout_override
            and (not self.default_timeout_us or requested_us < self.default_timeout_us)
        ):
            return requested_us
        return self.default_timeout_us


@dataclass(frozen=True, slots=True)
class BatchingRules:
    """The ``dynamic_batching`` settings that shape batches."""

    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    priority_levels: int = 0
    default_priority_level: int = 0
    default_policy: QueuePolicy = field(default_factory=QueuePolicy)
    level_policies: dict[int, QueuePolicy] = field(default_factory=dict)
    ragged_inputs: frozenset[str] = frozenset()

    def policy(self, level: int) -> QueuePolicy:
        return self.level_policies.get(level, self.default_policy)


@dataclass(slots=True, eq=False)
class Queued:
    """A request waiting in a queue, with the times that govern it."""

    request: InferenceRequest
    enqueued_ns: int
    deadline_ns: int | None
    key: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Batch:
    requests: list[InferenceRequest]
    reason: CloseReason

    @property
    def size(self) -> int:
        return sum(request.batch_size for request in self.requests)


class BatchFormer:
    """Priority queues of requests and the rules that turn them into batches."""

    def __init__(self, rules: BatchingRules, clock: Clock) -> None:
        self.rules = rules
        self._clock = clock
        levels = max(rules.priority_levels, 1)
        # Per level: requests in arrival order, then requests whose DELAY timeout passed.
        self._queues: list[deque[Queued]] = [deque() for _ in range(levels)]
        self._delayed: list[deque[Queued]] = [deque() for _ in range(levels)]
        policies = [rules.default_policy, *rules.level_policies.values()]
        # Whether any queue policy can time a request out.
        self.has_timeouts = any(policy.default_timeout_us or policy.allow_timeout_override for policy in policies)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues) + sum(len(queue) for queue in self._delayed)

    def level_of(self, request: InferenceRequest) -> int:
        """1-based priority level; 0 or out-of-range priorities get the default level."""
        levels = self.rules.priority_levels
        if not levels:
            return 1
        if 1 <= request.priority <= levels:
            return request.priority
        return self.rules.default_priority_level or levels

    def enqueue(self, request: InferenceRequest) -> None:
        """Queue a request, or raise UNAVAILABLE when its level's queue is full."""
        level = self.level_of(request)
        policy = self.rules.policy(level)
        index = level - 1
        if policy.max_queue_size and len(self._queues[index]) + len(self._delayed[index]) >= policy.max_queue_size:
            raise unavailable(f"{request_prefix(request.id)}Exceeds maximum queue size")
        now = self._clock()
        timeout_us = policy.timeout_us(request.timeout_us)
        deadline = now + timeout_us * _NS_PER_US if timeout_us else None
        self._queues[index].append(Queued(request, now, deadline, self._shape_key(request)))

    def _shape_key(self, request: InferenceRequest) -> tuple[Any, ...]:
        ragged = self.rules.ragged_inputs
        return tuple(
            sorted((name, () if name in ragged else tensor.shape[1:]) for name, tensor in request.inputs.items())
        )

    def expire(self) -> list[InferenceRequest]:
        """Apply queue timeouts: REJECT ones are removed and returned, DELAY ones move back."""
        now = self._clock()
        rejected: list[InferenceRequest] = []
        for index, queue in enumerate(self._queues):
            if not any(item.deadline_ns is not None and item.deadline_ns <= now for item in queue):
                continue
            policy = self.rules.policy(index + 1)
            keep: deque[Queued] = deque()
            for item in queue:
                if item.deadline_ns is None or item.deadline_ns > now:
                    keep.append(item)
                elif policy.timeout_action is TimeoutAction.REJECT:
                    rejected.append(item.request)
                else:
                    item.deadline_ns = None
                    self._delayed[index].append(item)
            self._queues[index] = keep
        return rejected

    def drop_cancelled(self) -> list[InferenceRequest]:
        """Remove and return queued requests whose clients went away."""
        dropped: list[InferenceRequest] = []
        for queues in (self._queues, self._delayed):
            for index, queue in enumerate(queues):
                if any(item.request.is_cancelled() for item in queue):
                    dropped.extend(item.request for item in queue if item.request.is_cancelled())
                    queues[index] = deque(item for item in queue if not item.request.is_cancelled())
        return dropped

    def _ordered(self) -> Iterator[tuple[deque[Queued], Queued]]:
        for index in range(len(self._queues)):
            for queue in (self._queues[index], self._delayed[index]):
                for item in queue:
                    yield queue, item

    def next_batch(self, *, flush: bool = False) -> Batch | None:
        """The batch to execute now, or None to wait (see :meth:`next_wakeup_ns`)."""
        candidates, stop = self._candidates()
        if not candidates:
            return None
        rules = self.rules
        if rules.max_batch_size <= 0:
            return self._take(candidates[:1], CloseReason.NO_BATCHING)
        sizes = [item.request.batch_size for _, item in candidates]
        if sum(sizes) >= rules.max_batch_size or stop is CloseReason.MAX_SIZE:
            return self._take(candidates, CloseReason.MAX_SIZE)
        preferred = self._best_preferred_prefix(sizes)
        largest_preferred = max(rules.preferred_batch_sizes, default=0)
        if preferred and sum(sizes[:preferred]) == largest_preferred:
            return self._take(candidates[:preferred], CloseReason.PREFERRED_SIZE)
        if stop is CloseReason.SHAPE_CHANGE:
            return self._take(candidates, CloseReason.SHAPE_CHANGE)
        oldest = min(item.enqueued_ns for _, item in candidates)
        if flush or self._clock() >= oldest + rules.max_queue_delay_us * _NS_PER_US:
            reason = CloseReason.FLUSH if flush else CloseReason.QUEUE_DELAY
            if preferred:
                return self._take(candidates[:preferred], reason)
            return self._take(candidates, reason)
        return None

    def next_deadline_ns(self) -> int | None:
        """When the earliest queue timeout falls due (None if no request can time out)."""
        return min((item.deadline_ns for _, item in self._ordered() if item.deadline_ns is not None), default=None)

    def next_wakeup_ns(self) -> int | None:
        """When the answer of :meth:`next_batch` or :meth:`expire` may change on its own."""
        times = [self.next_deadline_ns()]
        candidates, _ = self._candidates()
        if candidates:
            oldest = min(item.enqueued_ns for _, item in candidates)
            times.append(oldest + self.rules.max_queue_delay_us * _NS_PER_US)
        return min((time for time in times if time is not None), default=None)

    def _candidates(self) -> tuple[list[tuple[deque[Queued], Queued]], CloseReason | None]:
        """Requests from the head that fit one batch, and what stopped the batch from growing.

        The batch stops at the first request with other shapes (SHAPE_CHANGE) or the first
        that would take it past max_batch_size rows (MAX_SIZE); requests never overtake.
        """
        chosen: list[tuple[deque[Queued], Queued]] = []
        total = 0
        limit = max(self.rules.max_batch_size, 1)
        for queue, item in self._ordered():
            if chosen and item.key != chosen[0][1].key:
                return chosen, CloseReason.SHAPE_CHANGE
            if chosen and total + item.request.batch_size > limit:
                return chosen, CloseReason.MAX_SIZE
            chosen.append((queue, item))
            total += item.request.batch_size
        return chosen, None

    def _best_preferred_prefix(self, sizes: Sequence[int]) -> int:
        """Length of the longest prefix whose row count is a preferred batch size (0 if none)."""
        preferred = set(self.rules.preferred_batch_sizes)
        best = 0
        running = 0
        for length, size in enumerate(sizes, start=1):
            running += size
            if running in preferred:
                best = length
        return best

    @staticmethod
    def _take(chosen: list[tuple[deque[Queued], Queued]], reason: CloseReason) -> Batch:
        for queue, item in chosen:
            if queue[0] is item:
                queue.popleft()
            else:
                queue.remove(item)
        return Batch([item.request for _, item in chosen], reason)


def timed_out_error() -> NaiadError:
    """Triton's error for a request rejected by its queue timeout."""
    return unavailable("Request timeout expired")
