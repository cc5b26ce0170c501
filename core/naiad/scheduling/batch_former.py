"""Deciding when queued requests form a batch: Triton's dynamic-batching rules, clock injected.

This class holds no threads and never sleeps: the scheduler asks it for the next batch and
for the moment it should ask again, and it answers from the queues and the injected clock.
That makes every rule testable deterministically.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from naiad.errors import NaiadError, request_prefix, unavailable
from naiad.inference import InferenceRequest
from naiad.ragged import shape_key

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
    BACKLOG = "the queue was taken in while the batch formed"


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


@dataclass(slots=True, eq=False)
class _Payload:
    """A batch being formed for an idle instance (Triton's payload)."""

    key: tuple[Any, ...]
    items: list[Queued] = field(default_factory=list)
    rows: int = 0
    reason: CloseReason = CloseReason.QUEUE_DELAY
    saturated: bool = False

    def add(self, items: list[Queued], reason: CloseReason, saturates: bool) -> None:
        self.items.extend(items)
        self.rows += sum(max(item.request.batch_size, 1) for item in items)
        self.reason = reason
        self.saturated = self.saturated or saturates


@dataclass(frozen=True, slots=True)
class _Decision:
    """What one look at the queues found: requests to add to the batch (and whether that saturates
    it), or nothing yet and when the queue delay of what waits ends."""

    take: list[tuple[deque[Queued], Queued]] | None = None
    reason: CloseReason = CloseReason.QUEUE_DELAY
    saturates: bool = False
    wake_ns: int | None = None


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
        # Per level (0-based, made when first used: a config may declare 2**64 - 1 levels): requests in
        # arrival order, then requests whose DELAY timeout passed.
        self._queues: dict[int, deque[Queued]] = {}
        self._delayed: dict[int, deque[Queued]] = {}
        policies = [rules.default_policy, *rules.level_policies.values()]
        # Whether any queue policy can time a request out.
        self.has_timeouts = any(policy.default_timeout_us or policy.allow_timeout_override for policy in policies)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues.values()) + sum(len(queue) for queue in self._delayed.values())

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
        queue = self._queues.get(index)
        if queue is None:
            queue = self._queues[index] = deque()
            self._delayed[index] = deque()
        if policy.max_queue_size and len(queue) + len(self._delayed[index]) >= policy.max_queue_size:
            raise unavailable(f"{request_prefix(request.id)}Exceeds maximum queue size")
        now = self._clock()
        timeout_us = policy.timeout_us(request.timeout_us)
        deadline = now + timeout_us * _NS_PER_US if timeout_us else None
        queue.append(Queued(request, now, deadline, shape_key(request, self.rules.ragged_inputs, True)))

    def expire(self) -> list[InferenceRequest]:
        """Apply queue timeouts: REJECT ones are removed and returned, DELAY ones move back."""
        now = self._clock()
        rejected: list[InferenceRequest] = []
        for index, queue in list(self._queues.items()):
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
            for index, queue in list(queues.items()):
                if any(item.request.is_cancelled() for item in queue):
                    dropped.extend(item.request for item in queue if item.request.is_cancelled())
                    queues[index] = deque(item for item in queue if not item.request.is_cancelled())
        return dropped

    def _ordered(self) -> Iterator[tuple[deque[Queued], Queued]]:
        for index in sorted(self._queues):
            for queue in (self._queues[index], self._delayed[index]):
                for item in queue:
                    yield queue, item

    def next_batch(self, *, flush: bool = False) -> Batch | None:
        """The batch an idle instance executes now, or None to wait (see :meth:`next_wakeup_ns`).

        Triton's ``GetDynamicBatch``: requests from the head of the queues (priority first, never
        overtaking, same shapes) go at once when they make a preferred batch size (the largest one
        reachable without passing the largest preferred size), when they reach the largest preferred
        size (or ``max_batch_size`` without preferred sizes), when the next request has other shapes
        or would pass ``max_batch_size``, or once the oldest waited ``max_queue_delay``. As in Triton,
        a batch formed for an instance takes in what else is queued until the instance picks it up,
        while it is not saturated (a queue delay applies and it has not reached the largest
        preferred size): a backlog goes as one batch rather than leaving a remainder to wait.
        """
        if self.rules.max_batch_size <= 0:
            head = next(self._ordered(), None)
            return None if head is None else self._take([head], CloseReason.NO_BATCHING)
        decision = self._decide(None, flush)
        if decision.take is None:
            return None
        payload = _Payload(decision.take[0][1].key)
        while decision.take is not None:
            payload.add(self._remove(decision.take), decision.reason, decision.saturates)
            if payload.saturated:
                break
            decision = self._decide(payload, flush)
        return Batch([item.request for item in payload.items], payload.reason)

    def _decide(self, payload: _Payload | None, flush: bool) -> _Decision:
        """One look at the queues with ``payload`` formed so far: what to add to it, or when to look again."""
        rules = self.rules
        preferred = set(rules.preferred_batch_sizes)
        max_preferred = max(preferred, default=0) or rules.max_batch_size
        payload_rows = payload.rows if payload is not None else 0
        key = payload.key if payload is not None else None
        scanned: list[tuple[deque[Queued], Queued]] = []
        pending = 0
        best, best_reason = 0, CloseReason.MAX_SIZE  # the best prefix: a preferred size, or what fits
        crossed = stop = None  # the largest preferred size would be passed; what ended the scan
        for queue, item in self._ordered():
            rows = max(item.request.batch_size, 1)
            if payload_rows + pending == 0:
                key = item.key
            else:
                if payload_rows + pending + rows > max_preferred and not best and crossed is None:
                    best, crossed = len(scanned), CloseReason.MAX_SIZE
                if payload_rows + pending + rows > rules.max_batch_size:
                    stop = CloseReason.MAX_SIZE
                    break
                if item.key != key:
                    stop = crossed = CloseReason.SHAPE_CHANGE
                    break
            scanned.append((queue, item))
            pending += rows
            if payload_rows + pending in preferred:
                best, best_reason = len(scanned), CloseReason.PREFERRED_SIZE
        if not scanned:
            return _Decision()
        delay_ns = rules.max_queue_delay_us * _NS_PER_US
        oldest = min(item.enqueued_ns for _, item in scanned)
        exceeded = delay_ns > 0 and self._clock() - oldest >= delay_ns
        if best and not exceeded and not flush:
            return _Decision(scanned[:best], best_reason, crossed is not None or not delay_ns)
        if stop is not None or payload_rows + pending >= max_preferred:
            return _Decision(scanned, stop or CloseReason.MAX_SIZE, True)
        if flush or exceeded or not delay_ns:
            return _Decision(scanned, CloseReason.FLUSH if flush else CloseReason.QUEUE_DELAY, False)
        if payload is not None and crossed is None and payload.rows not in preferred:
            return _Decision(scanned, CloseReason.BACKLOG, False)
        return _Decision(wake_ns=oldest + delay_ns)

    def next_deadline_ns(self) -> int | None:
        """When the earliest queue timeout falls due (None if no request can time out)."""
        return min((item.deadline_ns for _, item in self._ordered() if item.deadline_ns is not None), default=None)

    def next_wakeup_ns(self) -> int | None:
        """When the answer of :meth:`next_batch` or :meth:`expire` may change on its own."""
        wake = None
        if self.rules.max_batch_size > 0:
            decision = self._decide(None, False)
            wake = self._clock() if decision.take is not None else decision.wake_ns  # due already: now
        times = [self.next_deadline_ns(), wake]
        return min((time for time in times if time is not None), default=None)

    @classmethod
    def _take(cls, chosen: list[tuple[deque[Queued], Queued]], reason: CloseReason) -> Batch:
        return Batch([item.request for item in cls._remove(chosen)], reason)

    @staticmethod
    def _remove(chosen: list[tuple[deque[Queued], Queued]]) -> list[Queued]:
        for queue, item in chosen:
            if queue[0] is item:
                queue.popleft()
            else:
                queue.remove(item)
        return [item for _, item in chosen]


def timed_out_error() -> NaiadError:
    """Triton's error for a request rejected by its queue timeout."""
    return unavailable("Request timeout expired")
