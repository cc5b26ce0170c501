"""Per-instance sequence batchers of the ``direct`` and ``oldest`` strategies, clock injected.

Both keep one queue per batch slot and run under the sequence scheduler's lock; neither
holds threads nor sleeps. ``direct`` forms a batch of one request per ready slot, padding
idle slots below the highest ready one (Triton's null requests, READY false). ``oldest``
issues each sequence's next request to a dynamic batch former once the previous one has
finished, so a batch never holds two requests of one sequence.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from naiad.inference import SEQUENCE_END, InferenceRequest
from naiad.ragged import shape_key
from naiad.scheduling.batch_former import Batch, BatchFormer, BatchingRules, Clock
from naiad.scheduling.sequence_controls import CorrelationId
from naiad.scheduling.sequence_table import Backlog, Entry, SequenceTable, SlotKey

_NS_PER_US = 1_000

Prepare = Callable[[SlotKey, InferenceRequest], None]


class DirectReason(enum.Enum):
    """Why a direct-strategy batch was sent when it was (logged at --log-verbose 1)."""

    READY = "sequence slots ready"
    UTILIZATION = "minimum slot utilization reached"
    QUEUE_DELAY = "queue delay expired"
    FLUSH = "flushing the queue"


@dataclass(frozen=True, slots=True)
class SlotBatch:
    """A direct-strategy batch: one entry per slot from 0 up, ``None`` for a padding slot."""

    instance: int
    entries: list[tuple[int, InferenceRequest | None]]
    template: InferenceRequest
    reason: DirectReason

    @property
    def size(self) -> int:
        return len(self.entries)

    @property
    def requests(self) -> list[InferenceRequest]:
        return [request for _, request in self.entries if request is not None]


class _SlotQueues:
    """Slot queues of one instance and what happens when a slot's sequence is over."""

    def __init__(self, instance: int, slots: int, table: SequenceTable) -> None:
        self.instance = instance
        self.table = table
        self.queues: list[deque[Entry]] = [deque() for _ in range(slots)]
        self.active: list[CorrelationId | None] = [None] * slots
        self.cancelled: list[InferenceRequest] = []  # answered CANCELLED by the scheduler

    def _put(self, slot: int, correlation_id: CorrelationId, entry: Entry) -> None:
        self.queues[slot].append(entry)
        self.active[slot] = correlation_id

    def _release(self, slot: int, ended: CorrelationId | None = None) -> Backlog | None:
        queue = self.queues[slot]
        self.cancelled.extend(entry.request for entry in queue if entry.request is not None)
        queue.clear()
        backlog, cancelled = self.table.release(SlotKey(self.instance, slot), ended)
        self.cancelled.extend(cancelled)
        if backlog is None:
            self.active[slot] = None
            return None
        self.queues[slot] = backlog.entries
        self.active[slot] = backlog.correlation_id
        return backlog

    def take_cancelled(self) -> list[InferenceRequest]:
        """Drain the requests to answer CANCELLED."""
        cancelled, self.cancelled = self.cancelled, []
        return cancelled


class DirectSlots(_SlotQueues):
    """Triton's ``DirectSequenceBatch`` for one instance."""

    def __init__(
        self,
        instance: int,
        slots: int,
        table: SequenceTable,
        clock: Clock,
        *,
        max_batch_size: int,
        max_queue_delay_us: int = 0,
        minimum_slot_utilization: float = 0.0,
        ragged_inputs: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(instance, slots, table)
        self._clock = clock
        self._batching = max_batch_size > 0
        self._max_batch_size = max(max_batch_size, 1)
        self._delay_ns = max_queue_delay_us * _NS_PER_US
        self._utilization = minimum_slot_utilization
        self._ragged = ragged_inputs
        self._max_active = -1
        self._wakeup: int | None = None

    def enqueue(self, slot: int, correlation_id: CorrelationId, entry: Entry) -> None:
        self._put(slot, correlation_id, entry)
        self._max_active = max(self._max_active, slot)

    def idle(self) -> bool:
        return all(not queue for queue in self.queues) and all(active is None for active in self.active)

    def next_wakeup_ns(self) -> int | None:
        return self._wakeup

    def next_batch(self, *, flush: bool = False) -> SlotBatch | None:
        """The batch to execute now, or None (then wait until :meth:`next_wakeup_ns` or new work)."""
        self._wakeup = None
        self._release_finished(flush)
        batch = self._form(flush)
        while self._max_active >= 0 and self.active[self._max_active] is None:
            self._max_active -= 1
        return batch

    def _release_finished(self, flush: bool) -> None:
        """Free slots whose sequence idled out (marker), was cancelled, or (flushing) has nothing queued."""
        for slot in range(self._max_active + 1):
            queue = self.queues[slot]
            front = queue[0].request if queue else None
            if queue and front is None:
                queue.popleft()
                self._release(slot)
            elif (front is not None and front.is_cancelled()) or (
                flush and not queue and self.active[slot] is not None
            ):
                self._release(slot, self.active[slot])

    def _form(self, flush: bool) -> SlotBatch | None:
        ready = [slot for slot in range(self._max_active + 1) if self.queues[slot]]
        if not ready:
            return None
        reason = self._reason(ready, flush)
        if reason is None:
            return None
        template = self.queues[ready[0]][0].request
        assert template is not None
        key = shape_key(template, self._ragged, self._batching)
        entries: list[tuple[int, InferenceRequest | None]] = []
        for slot in range(ready[-1] + 1):
            queue = self.queues[slot]
            front = queue[0].request if queue else None
            if front is None or shape_key(front, self._ragged, self._batching) != key:
                entries.append((slot, None))
                continue
            queue.popleft()
            entries.append((slot, front))
            if front.flags & SEQUENCE_END:
                self._release(slot)
        return SlotBatch(self.instance, entries, template, reason)

    def _reason(self, ready: list[int], flush: bool) -> DirectReason | None:
        """Triton's rule: send at once unless both a queue delay and a minimum utilization are set."""
        if flush:
            return DirectReason.FLUSH
        if not self._delay_ns or not self._utilization:
            return DirectReason.READY
        earliest = min(self.queues[slot][0].enqueued_ns for slot in ready)
        if self._clock() - earliest > self._delay_ns:
            return DirectReason.QUEUE_DELAY
        if len(ready) / self._max_batch_size >= self._utilization:
            return DirectReason.UTILIZATION
        self._wakeup = earliest + self._delay_ns + 1
        return None


class OldestSlots(_SlotQueues):
    """Triton's ``OldestSequenceBatch`` for one instance: slot queues feeding a batch former."""

    def __init__(
        self, instance: int, slots: int, table: SequenceTable, clock: Clock, rules: BatchingRules, prepare: Prepare
    ) -> None:
        super().__init__(instance, slots, table)
        self.former = BatchFormer(rules, clock)
        self._prepare = prepare
        self.in_flight = [False] * slots
        self._slot_of: dict[int, int] = {}  # id(request) -> slot, for requests issued to the former

    def enqueue(self, slot: int, correlation_id: CorrelationId, entry: Entry) -> None:
        self._put(slot, correlation_id, entry)
        if not self.in_flight[slot]:
            self._advance(slot)

    def idle(self) -> bool:
        return not any(self.in_flight) and not len(self.former) and all(active is None for active in self.active)

    def next_wakeup_ns(self) -> int | None:
        return self.former.next_wakeup_ns()

    def next_batch(self, *, flush: bool = False) -> Batch | None:
        """The next batch of issued requests (at most one per sequence), or None to wait."""
        for request in self.former.drop_cancelled():
            self.cancelled.append(request)
            self.complete(request)
        if flush:
            for slot, active in enumerate(self.active):
                if active is not None and not self.queues[slot] and not self.in_flight[slot]:
                    self._release(slot, active)
                    self._advance(slot)
        return self.former.next_batch(flush=flush)

    def slot_of(self, request: InferenceRequest) -> int:
        """The slot an issued, unfinished request came from."""
        return self._slot_of[id(request)]

    def complete(self, request: InferenceRequest) -> None:
        """A request issued from a slot finished: issue the slot's next request."""
        slot = self._slot_of.pop(id(request), None)
        if slot is not None:
            self._advance(slot)

    def complete_all(self, requests: Sequence[InferenceRequest]) -> None:
        """:meth:`complete` for every request of an executed batch."""
        for request in requests:
            self.complete(request)

    def _advance(self, slot: int) -> None:
        """Triton's ``CompleteAndNext``: issue the slot's next request, handing over the slot at END."""
        retry = True
        while retry:
            retry = False
            self.in_flight[slot] = False
            queue = self.queues[slot]
            release = False
            ended: CorrelationId | None = None
            if queue:
                request = queue[0].request
                if request is None:
                    queue.popleft()
                    release = True
                elif request.is_cancelled():
                    release, ended = True, self.active[slot]
                else:
                    queue.popleft()
                    release = bool(request.flags & SEQUENCE_END)
                    self._prepare(SlotKey(self.instance, slot), request)
                    self.in_flight[slot] = True
                    self._slot_of[id(request)] = slot
                    self.former.enqueue(request)
            if release and self._release(slot, ended) is not None and not self.in_flight[slot]:
                retry = True
