"""Slot assignment, backlog, idle expiry and the direct/oldest batchers: injected clock, no threads."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.backend import SEQUENCE_END, SEQUENCE_START, InferenceRequest, RequestedOutput, ResponseSender, Tensor
from naiad.errors import ErrorCode, NaiadError
from naiad.scheduling.batch_former import BatchingRules, CloseReason
from naiad.scheduling.sequence_controls import CorrelationId
from naiad.scheduling.sequence_slots import DirectReason, DirectSlots, OldestSlots
from naiad.scheduling.sequence_table import Entry, SequenceTable, SlotKey

US = 1_000
START, END = SEQUENCE_START, SEQUENCE_END


class FakeClock:
    """Monotonic nanoseconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def advance_us(self, microseconds: int) -> None:
        self.now += microseconds * US


def req(
    correlation_id: CorrelationId, flags: int = 0, tag: str = "", *, width: int = 1, rows: int = 1
) -> InferenceRequest:
    return InferenceRequest(
        model_name="m",
        model_version=1,
        inputs={"IN": Tensor("IN", "FP32", np.zeros((rows, width), dtype=np.float32))},
        requested_outputs={"OUT": RequestedOutput("OUT")},
        sender=ResponseSender(lambda event: None),
        id=tag,
        correlation_id=correlation_id,
        flags=flags,
        batch_size=rows,
    )


def table(clock: FakeClock, instances: int = 1, slots: int = 2, idle_us: int = 1000) -> SequenceTable:
    return SequenceTable("m", instances, slots, idle_us, clock)


def message(error: pytest.ExceptionInfo[NaiadError]) -> tuple[ErrorCode, str]:
    return error.value.code, error.value.message


# -- SequenceTable -----------------------------------------------------------------------------


def test_request_checks_use_tritons_order_and_texts() -> None:
    book = table(FakeClock())
    with pytest.raises(NaiadError) as error:
        book.check(req(0, START, rows=2))
    assert message(error) == (
        ErrorCode.INVALID_ARG,
        "inference request to model 'm' must specify batch-size 1 due to requirements of sequence batcher",
    )
    for missing in (0, ""):
        with pytest.raises(NaiadError) as error:
            book.check(req(missing, START))
        assert (
            error.value.message == "inference request to model 'm' must specify a non-zero or non-empty correlation ID"
        )
    for correlation_id in (77, "abc"):
        with pytest.raises(NaiadError) as error:
            book.check(req(correlation_id))
        assert error.value.message == (
            f"inference request for sequence {correlation_id} to model 'm' must specify the START flag on the "
            "first request of the sequence"
        )


def test_free_slots_go_lowest_slot_first_across_instances_then_the_backlog() -> None:
    book = table(FakeClock(), instances=2, slots=2)
    placed = [book.admit(req(cid, START)) for cid in (1, 2, 3, 4, 5)]
    slots = [None if p is None else p[0] for p in placed]
    assert slots == [SlotKey(0, 0), SlotKey(1, 0), SlotKey(0, 1), SlotKey(1, 1), None]
    book.check(req(5))  # a backlogged sequence is known
    assert book.admit(req(5)) is None
    assert [len(b.entries) for b in book.backlogs] == [2]


def test_end_forgets_the_sequence_and_string_ids_are_distinct_from_integers() -> None:
    book = table(FakeClock())
    assert book.admit(req(7, START)) is not None
    book.check(req("7", START))
    with pytest.raises(NaiadError):
        book.check(req("7"))
    assert book.admit(req(7, END)) is not None
    with pytest.raises(NaiadError):
        book.check(req(7))


def test_a_released_slot_goes_to_the_oldest_backlog_or_back_to_the_free_list() -> None:
    book = table(FakeClock(), slots=1)
    book.admit(req(1, START))
    assert book.admit(req(2, START)) is None
    assert book.admit(req(3, START | END)) is None  # whole sequence in the backlog
    backlog, cancelled = book.release(SlotKey(0, 0))
    assert backlog is not None
    assert (backlog.correlation_id, cancelled) == (2, [])
    assert book.assigned[2] == SlotKey(0, 0)
    backlog, _ = book.release(SlotKey(0, 0))
    assert backlog is not None
    assert backlog.correlation_id == 3
    assert 3 not in book.assigned  # it already ended
    assert book.release(SlotKey(0, 0)) == (None, [])
    placed = book.admit(req(4, START))
    assert placed is not None
    assert placed[0] == SlotKey(0, 0)


def test_cancelled_backlogs_are_skipped_and_returned() -> None:
    book = table(FakeClock(), slots=1)
    book.admit(req(1, START))
    waiting = req(2, START)
    book.admit(waiting)
    book.admit(req(3, START))
    waiting.cancel()
    backlog, cancelled = book.release(SlotKey(0, 0), ended=1)
    assert backlog is not None
    assert backlog.correlation_id == 3
    assert cancelled == [waiting]
    assert book.assigned == {3: SlotKey(0, 0)}


def test_idle_sequences_with_a_slot_are_reaped_from_their_last_arrival() -> None:
    clock = FakeClock()
    book = table(clock, slots=1, idle_us=1000)
    book.admit(req(1, START))
    book.admit(req(2, START))  # backlogged
    clock.advance_us(600)
    book.admit(req(1))
    assert book.next_wakeup_ns() == 1000 * US  # sequence 2's deadline
    clock.advance_us(400)
    assert book.reap() == []  # 2 is idle but backlogged: kept
    assert book.next_wakeup_ns() == 1600 * US  # sequence 1's deadline; 2 is rechecked in 50 ms
    clock.advance_us(600)
    assert book.reap() == [(1, SlotKey(0, 0))]
    with pytest.raises(NaiadError):
        book.check(req(1))


def test_backlogged_requests_time_out_with_tritons_text() -> None:
    clock = FakeClock()
    book = table(clock, slots=1)
    book.admit(req(1, START))
    late = req(2, START)
    late.timeout_us = 300
    book.admit(late)
    assert book.next_wakeup_ns() == 300 * US
    clock.advance_us(300)
    assert book.expire_backlogs() == [late]
    with pytest.raises(NaiadError):
        book.check(req(2))


# -- DirectSlots -------------------------------------------------------------------------------


def direct(clock: FakeClock, slots: int = 4, **settings: object) -> tuple[SequenceTable, DirectSlots]:
    book = table(clock, slots=slots)
    options: dict[str, object] = {"max_batch_size": slots, **settings}
    return book, DirectSlots(0, slots, book, clock, **options)  # type: ignore[arg-type]


def send(book: SequenceTable, batcher: DirectSlots | OldestSlots, request: InferenceRequest) -> None:
    book.check(request)
    placed = book.admit(request)
    if placed is not None:
        batcher.enqueue(placed[0].slot, request.correlation_id, placed[1])


def shape(batch: object) -> list[str]:
    entries = batch.entries  # type: ignore[attr-defined]
    return [request.id if request is not None else "-" for _, request in entries]


def test_direct_batches_one_request_per_slot_in_slot_order() -> None:
    clock = FakeClock()
    book, batcher = direct(clock)
    for request in (req(1, START, "a0"), req(1, 0, "a1"), req(2, START, "b0")):
        send(book, batcher, request)
    batch = batcher.next_batch()
    assert batch is not None
    assert (shape(batch), batch.reason) == (["a0", "b0"], DirectReason.READY)
    batch = batcher.next_batch()
    assert batch is not None
    assert shape(batch) == ["a1"]
    assert batcher.next_batch() is None


def test_idle_lower_slots_are_padded_with_null_entries() -> None:
    clock = FakeClock()
    book, batcher = direct(clock)
    send(book, batcher, req(1, START, "a0"))
    send(book, batcher, req(2, START, "b0"))
    batcher.next_batch()
    send(book, batcher, req(2, 0, "b1"))
    batch = batcher.next_batch()
    assert batch is not None
    assert shape(batch) == ["-", "b1"]
    assert batch.template.id == "b1"
    assert batch.size == 2


def test_end_hands_the_slot_to_a_backlogged_sequence_for_the_next_batch() -> None:
    clock = FakeClock()
    book, batcher = direct(clock, slots=1)
    send(book, batcher, req(1, START | END, "a"))
    send(book, batcher, req(2, START, "b0"))
    send(book, batcher, req(2, 0, "b1"))
    assert shape(batcher.next_batch()) == ["a"]
    assert book.assigned == {2: SlotKey(0, 0)}
    assert shape(batcher.next_batch()) == ["b0"]
    send(book, batcher, req(2, END, "b2"))
    assert shape(batcher.next_batch()) == ["b1"]
    assert shape(batcher.next_batch()) == ["b2"]
    assert batcher.idle()


def test_queue_delay_waits_for_slot_utilization() -> None:
    clock = FakeClock()
    book, batcher = direct(clock, max_queue_delay_us=100, minimum_slot_utilization=0.5)
    send(book, batcher, req(1, START, "a"))
    assert batcher.next_batch() is None
    assert batcher.next_wakeup_ns() == 100 * US + 1
    send(book, batcher, req(2, START, "b"))
    batch = batcher.next_batch()  # 2 of 4 slots ready: utilization 0.5 reached
    assert batch is not None
    assert (shape(batch), batch.reason) == (["a", "b"], DirectReason.UTILIZATION)
    send(book, batcher, req(1, 0, "a1"))
    assert batcher.next_batch() is None
    clock.advance_us(101)
    batch = batcher.next_batch()
    assert batch is not None
    assert (shape(batch), batch.reason) == (["a1"], DirectReason.QUEUE_DELAY)


def test_a_reaper_marker_frees_the_slot_after_queued_requests() -> None:
    clock = FakeClock()
    book, batcher = direct(clock, slots=1)
    send(book, batcher, req(1, START, "a0"))
    send(book, batcher, req(1, 0, "a1"))
    send(book, batcher, req(2, START, "b0"))
    clock.advance_us(5000)
    for correlation_id, slot in book.reap():
        batcher.enqueue(slot.slot, correlation_id, Entry(None, clock()))
    assert shape(batcher.next_batch()) == ["a0"]
    assert shape(batcher.next_batch()) == ["a1"]
    assert shape(batcher.next_batch()) == ["b0"]  # marker released the slot, b moved in


def test_a_cancelled_request_ends_its_sequence_and_cancels_what_follows() -> None:
    clock = FakeClock()
    book, batcher = direct(clock, slots=1)
    first = req(1, START, "a0")
    second = req(1, 0, "a1")
    send(book, batcher, first)
    send(book, batcher, second)
    first.cancel()
    assert batcher.next_batch() is None
    assert batcher.take_cancelled() == [first, second]
    assert batcher.idle()
    with pytest.raises(NaiadError):
        book.check(req(1))


def test_flush_releases_slots_with_nothing_queued_so_backlogs_run() -> None:
    clock = FakeClock()
    book, batcher = direct(clock, slots=1)
    send(book, batcher, req(1, START, "a0"))
    send(book, batcher, req(2, START, "b0"))
    assert shape(batcher.next_batch()) == ["a0"]
    assert batcher.next_batch() is None  # sequence 1 holds the slot
    batch = batcher.next_batch(flush=True)
    assert batch is not None
    assert (shape(batch), batch.reason) == (["b0"], DirectReason.FLUSH)
    assert batcher.next_batch(flush=True) is None
    assert batcher.idle()


def test_requests_with_other_shapes_wait_behind_padding() -> None:
    clock = FakeClock()
    book, batcher = direct(clock)
    send(book, batcher, req(1, START, "a", width=2))
    send(book, batcher, req(2, START, "b", width=3))
    assert shape(batcher.next_batch()) == ["a", "-"]  # as Triton: padded up to the highest ready slot
    assert shape(batcher.next_batch()) == ["-", "b"]


# -- OldestSlots -------------------------------------------------------------------------------


def oldest(
    clock: FakeClock, slots: int = 4, **rules: object
) -> tuple[SequenceTable, OldestSlots, list[tuple[SlotKey, str]]]:
    book = table(clock, slots=slots)
    issued: list[tuple[SlotKey, str]] = []
    settings: dict[str, object] = {"max_batch_size": 4, **rules}
    batcher = OldestSlots(
        0,
        slots,
        book,
        clock,
        BatchingRules(**settings),  # type: ignore[arg-type]
        lambda slot, request: issued.append((slot, request.id)),
    )
    return book, batcher, issued


def ids(batch: object) -> list[str]:
    return [request.id for request in batch.requests]  # type: ignore[attr-defined]


def test_oldest_issues_one_request_per_sequence_until_it_completes() -> None:
    clock = FakeClock()
    book, batcher, issued = oldest(clock, max_queue_delay_us=100)
    for request in (req(1, START, "a0"), req(1, 0, "a1"), req(2, START, "b0")):
        send(book, batcher, request)
    assert issued == [(SlotKey(0, 0), "a0"), (SlotKey(0, 1), "b0")]
    assert batcher.next_batch() is None
    clock.advance_us(100)
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch), batch.reason) == (["a0", "b0"], CloseReason.QUEUE_DELAY)
    assert [batcher.slot_of(request) for request in batch.requests] == [0, 1]
    for request in batch.requests:
        batcher.complete(request)
    assert issued[-1] == (SlotKey(0, 0), "a1")
    clock.advance_us(100)
    assert ids(batcher.next_batch()) == ["a1"]


def test_oldest_sends_a_preferred_batch_at_once() -> None:
    clock = FakeClock()
    book, batcher, _ = oldest(clock, preferred_batch_sizes=(2,), max_queue_delay_us=10_000)
    send(book, batcher, req(1, START, "a"))
    assert batcher.next_batch() is None
    send(book, batcher, req(2, START, "b"))
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch), batch.reason) == (["a", "b"], CloseReason.PREFERRED_SIZE)


def test_oldest_end_hands_over_the_slot_once_the_end_request_completes() -> None:
    clock = FakeClock()
    book, batcher, issued = oldest(clock, slots=1)
    send(book, batcher, req(1, START | END, "a"))
    send(book, batcher, req(2, START, "b0"))
    assert issued == [(SlotKey(0, 0), "a")]
    batch = batcher.next_batch()
    assert ids(batch) == ["a"]
    assert book.assigned == {2: SlotKey(0, 0)}
    batcher.complete(batch.requests[0])  # type: ignore[union-attr]
    assert issued[-1] == (SlotKey(0, 0), "b0")


def test_oldest_idle_marker_and_flush_release_slots() -> None:
    clock = FakeClock()
    book, batcher, issued = oldest(clock, slots=1)
    send(book, batcher, req(1, START, "a0"))
    send(book, batcher, req(2, START, "b0"))
    batch = batcher.next_batch()
    batcher.complete(batch.requests[0])  # type: ignore[union-attr]
    assert not batcher.idle()
    assert batcher.next_batch(flush=True) is not None  # slot 0 freed for the backlog, b0 issued
    assert issued[-1] == (SlotKey(0, 0), "b0")
    clock.advance_us(5000)
    for correlation_id, slot in book.reap():
        batcher.enqueue(slot.slot, correlation_id, Entry(None, clock()))
    assert batcher.active == [2]  # b0 is still in flight: the marker waits behind it
