"""Which sequence holds which batch slot: admission, backlog and idle expiry, clock injected.

Like :mod:`naiad.scheduling.batch_former` this holds no threads and never sleeps; the
sequence scheduler calls it under its lock. The rules follow Triton's
``SequenceBatchScheduler``: free slots are handed out lowest slot number first, a sequence
keeps its slot until its END request is taken for execution (or it idles out), and new
sequences wait in a first-come backlog while every slot is taken.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from naiad.errors import NaiadError, invalid_arg, unavailable
from naiad.inference import SEQUENCE_END, SEQUENCE_START, InferenceRequest
from naiad.scheduling.sequence_controls import CorrelationId

Clock = Callable[[], int]  # monotonic nanoseconds

_NS_PER_US = 1_000
BACKLOG_IDLE_RECHECK_NS = 50_000_000  # Triton's reaper revisits idle backlogged sequences every 50 ms


class SlotKey(NamedTuple):
    """One batch slot: the instance (index among the model's instances) and the slot within it."""

    instance: int
    slot: int


@dataclass(slots=True, eq=False)
class Entry:
    """A slot-queue item: a request, or ``None`` — the reaper's marker that ends an idle sequence."""

    request: InferenceRequest | None
    enqueued_ns: int


@dataclass(slots=True, eq=False)
class Backlog:
    """The queued requests of a sequence that waits for a slot."""

    correlation_id: CorrelationId
    entries: deque[Entry] = field(default_factory=deque)
    expires_ns: int | None = None

    def cancelled(self) -> bool:
        return any(entry.request is not None and entry.request.is_cancelled() for entry in self.entries)


def backlog_timeout_error() -> NaiadError:
    """Triton's error for backlogged requests whose timeout passed before a slot freed."""
    return unavailable("timeout of the corresponding sequence has been expired")


class SequenceTable:
    """Slot assignment, backlog and idle tracking for one model version's sequences."""

    def __init__(self, model_name: str, instances: int, slots_per_instance: int, idle_us: int, clock: Clock) -> None:
        self.model_name = model_name
        self._clock = clock
        self._idle_ns = idle_us * _NS_PER_US
        self._free: list[tuple[int, int]] = [
            (slot, instance) for slot in range(slots_per_instance) for instance in range(instances)
        ]
        heapq.heapify(self._free)
        self.assigned: dict[CorrelationId, SlotKey] = {}
        self._backlog_of: dict[CorrelationId, Backlog] = {}
        self.backlogs: deque[Backlog] = deque()
        self._last_seen: dict[CorrelationId, int] = {}

    # -- admission -----------------------------------------------------------------------------

    def check(self, request: InferenceRequest) -> None:
        """Triton's request checks for sequence models, in its order and with its texts."""
        if request.batch_size > 1:
            raise invalid_arg(
                f"inference request to model '{self.model_name}' must specify batch-size 1 due to requirements "
                "of sequence batcher"
            )
        correlation_id = request.correlation_id
        if correlation_id == 0 or correlation_id == "":
            raise invalid_arg(
                f"inference request to model '{self.model_name}' must specify a non-zero or non-empty correlation ID"
            )
        if not request.flags & SEQUENCE_START and not self.active(correlation_id):
            raise invalid_arg(
                f"inference request for sequence {correlation_id} to model '{self.model_name}' must "
                "specify the START flag on the first request of the sequence"
            )

    def active(self, correlation_id: CorrelationId) -> bool:
        """Whether the sequence has started and not ended (in a slot or in the backlog)."""
        return correlation_id in self.assigned or correlation_id in self._backlog_of

    def admit(self, request: InferenceRequest) -> tuple[SlotKey, Entry] | None:
        """Route a checked request: the slot to queue it in, or None when it joined the backlog."""
        correlation_id = request.correlation_id
        now = self._clock()
        self._last_seen[correlation_id] = now
        entry = Entry(request, now)
        end = bool(request.flags & SEQUENCE_END)
        slot = self.assigned.get(correlation_id)
        if slot is None and correlation_id not in self._backlog_of and self._free:
            index, instance = heapq.heappop(self._free)
            slot = self.assigned[correlation_id] = SlotKey(instance, index)
        if slot is not None:
            if end:
                del self.assigned[correlation_id]
            return slot, entry
        backlog = self._backlog_of.get(correlation_id)
        if backlog is None:
            backlog = Backlog(correlation_id)
            self.backlogs.append(backlog)
            if not end:
                self._backlog_of[correlation_id] = backlog
        elif end:
            del self._backlog_of[correlation_id]
        backlog.entries.append(entry)
        if request.timeout_us:
            deadline = now + request.timeout_us * _NS_PER_US
            backlog.expires_ns = deadline if backlog.expires_ns is None else min(backlog.expires_ns, deadline)
        return None

    # -- slots coming free ------------------------------------------------------------------------

    def release(
        self, slot: SlotKey, ended: CorrelationId | None = None
    ) -> tuple[Backlog | None, list[InferenceRequest]]:
        """A slot's sequence is over: give the slot to the oldest backlogged sequence, or free it.

        ``ended`` names a sequence ended early (cancelled, idle, flushed): it is forgotten so
        its next request needs START. Returns the backlog now owning the slot (if any) and
        the requests of backlogged sequences found cancelled on the way.
        """
        if ended is not None and self.assigned.get(ended) == slot:
            del self.assigned[ended]
            self._last_seen.pop(ended, None)
        cancelled: list[InferenceRequest] = []
        while self.backlogs:
            backlog = self.backlogs.popleft()
            correlation_id = backlog.correlation_id
            last = backlog.entries[-1].request
            is_cancelled = backlog.cancelled()
            if self._backlog_of.get(correlation_id) is backlog:
                del self._backlog_of[correlation_id]
                if not is_cancelled and last is not None and not last.flags & SEQUENCE_END:
                    self.assigned[correlation_id] = slot
            if is_cancelled:
                cancelled.extend(entry.request for entry in backlog.entries if entry.request is not None)
                continue
            return backlog, cancelled
        heapq.heappush(self._free, (slot.slot, slot.instance))
        return None, cancelled

    # -- time -----------------------------------------------------------------------------------

    def forget(self, correlation_id: CorrelationId) -> SlotKey | None:
        """End a sequence that holds a slot without an END request (an iterative sequence whose request
        was not rescheduled); its slot must be force-ended, as a reaped one's."""
        self._last_seen.pop(correlation_id, None)
        return self.assigned.pop(correlation_id, None)

    def reap(self) -> list[tuple[CorrelationId, SlotKey]]:
        """Idle sequences holding a slot, now forgotten; their slots must be force-ended.

        Idle time counts from the sequence's last request arrival (Triton's rule); a
        sequence still in the backlog is not reaped.
        """
        now = self._clock()
        ended: list[tuple[CorrelationId, SlotKey]] = []
        for correlation_id, seen in list(self._last_seen.items()):
            if now - seen < self._idle_ns:
                continue
            slot = self.assigned.pop(correlation_id, None)
            if slot is not None:
                ended.append((correlation_id, slot))
                del self._last_seen[correlation_id]
            elif correlation_id not in self._backlog_of:
                del self._last_seen[correlation_id]
        return ended

    def expire_backlogs(self) -> list[InferenceRequest]:
        """Remove backlogged sequences whose request timeout passed; returns their requests."""
        now = self._clock()
        expired: list[InferenceRequest] = []
        keep: deque[Backlog] = deque()
        for backlog in self.backlogs:
            if backlog.expires_ns is None or backlog.expires_ns > now:
                keep.append(backlog)
                continue
            if self._backlog_of.get(backlog.correlation_id) is backlog:
                del self._backlog_of[backlog.correlation_id]
            expired.extend(entry.request for entry in backlog.entries if entry.request is not None)
        self.backlogs = keep
        return expired

    def next_wakeup_ns(self) -> int | None:
        """When :meth:`reap` or :meth:`expire_backlogs` may next have something to do."""
        now = self._clock()
        times = [backlog.expires_ns for backlog in self.backlogs if backlog.expires_ns is not None]
        for correlation_id, seen in self._last_seen.items():
            due = seen + self._idle_ns
            if due <= now and correlation_id in self._backlog_of:
                due = now + BACKLOG_IDLE_RECHECK_NS
            times.append(due)
        return min(times, default=None)
