"""The batch former's rules, driven by an injected clock: no threads, no sleeps."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.backend import InferenceRequest, RequestedOutput, ResponseSender, Tensor
from naiad.errors import ErrorCode, NaiadError
from naiad.scheduling.batch_former import BatchFormer, BatchingRules, CloseReason, QueuePolicy, TimeoutAction

US = 1_000


class FakeClock:
    """Monotonic nanoseconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def advance_us(self, microseconds: int) -> None:
        self.now += microseconds * US


def make_request(
    rows: int = 1, width: int = 4, *, priority: int = 0, timeout_us: int = 0, tag: str = ""
) -> InferenceRequest:
    data = np.zeros((rows, width), dtype=np.float32)
    return InferenceRequest(
        model_name="m",
        model_version=1,
        inputs={"X": Tensor("X", "FP32", data)},
        requested_outputs={"Y": RequestedOutput("Y")},
        sender=ResponseSender(lambda event: None),
        id=tag,
        priority=priority,
        timeout_us=timeout_us,
        batch_size=rows,
    )


def ids(requests: list[InferenceRequest]) -> list[str]:
    return [request.id for request in requests]


def former(clock: FakeClock, **rules: object) -> BatchFormer:
    settings: dict[str, object] = {"max_batch_size": 8, **rules}
    return BatchFormer(BatchingRules(**settings), clock)  # type: ignore[arg-type]


def test_zero_delay_sends_what_is_queued_at_once() -> None:
    clock = FakeClock()
    batcher = former(clock)
    for tag in "abc":
        batcher.enqueue(make_request(tag=tag))
    batch = batcher.next_batch()
    assert batch is not None
    assert ids(batch.requests) == ["a", "b", "c"]
    assert batch.reason is CloseReason.QUEUE_DELAY
    assert batcher.next_batch() is None


def test_waits_for_the_queue_delay_then_sends() -> None:
    clock = FakeClock()
    batcher = former(clock, max_queue_delay_us=500)
    batcher.enqueue(make_request(tag="a"))
    clock.advance_us(200)
    batcher.enqueue(make_request(tag="b"))
    assert batcher.next_batch() is None
    assert batcher.next_wakeup_ns() == 500 * US
    clock.advance_us(300)
    batch = batcher.next_batch()
    assert batch is not None
    assert ids(batch.requests) == ["a", "b"]
    assert batch.reason is CloseReason.QUEUE_DELAY


def test_a_delay_that_passes_after_a_look_wakes_the_instance_at_once() -> None:
    """The delay may pass between an idle instance's look and its question of when to look again: the
    answer is now, or the queued requests would wait for the next arrival."""
    clock = FakeClock()
    batcher = former(clock, max_queue_delay_us=500)
    batcher.enqueue(make_request(tag="a"))
    assert batcher.next_batch() is None
    clock.advance_us(600)
    assert batcher.next_wakeup_ns() == clock.now


def test_max_batch_size_sends_without_waiting_and_counts_rows() -> None:
    clock = FakeClock()
    batcher = former(clock, max_batch_size=4, max_queue_delay_us=10_000)
    batcher.enqueue(make_request(rows=3, tag="a"))
    assert batcher.next_batch() is None
    batcher.enqueue(make_request(rows=2, tag="b"))  # 3 + 2 > 4: b waits for the next batch
    batcher.enqueue(make_request(rows=1, tag="c"))
    batch = batcher.next_batch()
    assert batch is not None
    assert ids(batch.requests) == ["a"]
    assert batch.size == 3
    assert batch.reason is CloseReason.MAX_SIZE


def test_a_full_batch_is_max_size() -> None:
    clock = FakeClock()
    batcher = former(clock, max_batch_size=4, max_queue_delay_us=10_000)
    for tag in "abcd":
        batcher.enqueue(make_request(tag=tag))
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch.requests), batch.reason) == (["a", "b", "c", "d"], CloseReason.MAX_SIZE)


def test_any_preferred_size_is_sent_at_once() -> None:
    """As Triton's GetDynamicBatch: the largest preferred prefix of what is queued goes at once."""
    clock = FakeClock()
    batcher = former(clock, preferred_batch_sizes=(2, 4), max_queue_delay_us=10_000)
    batcher.enqueue(make_request(tag="a"))
    assert batcher.next_batch() is None
    batcher.enqueue(make_request(tag="b"))
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch.requests), batch.reason) == (["a", "b"], CloseReason.PREFERRED_SIZE)
    for tag in "cde":
        batcher.enqueue(make_request(tag=tag))
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch.requests), batch.reason) == (["c", "d"], CloseReason.PREFERRED_SIZE)
    assert batcher.next_batch() is None  # e waits for the delay, or for company
    clock.advance_us(10_000)
    batch = batcher.next_batch()
    assert batch is not None
    assert ids(batch.requests) == ["e"]


def test_past_the_delay_everything_queued_goes() -> None:
    clock = FakeClock()
    batcher = former(clock, preferred_batch_sizes=(4, 6), max_queue_delay_us=100)
    for tag in "abc":
        batcher.enqueue(make_request(tag=tag))
    assert batcher.next_batch() is None
    assert batcher.next_wakeup_ns() == 100 * US
    clock.advance_us(100)
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch.requests), batch.reason) == (["a", "b", "c"], CloseReason.QUEUE_DELAY)


@pytest.mark.parametrize(("queued", "batches"), [("abc", [["a", "b"]]), ("abcde", [["a", "b", "c", "d", "e"]])])
def test_a_backlog_goes_as_one_batch_past_the_largest_preferred_size(queued: str, batches: list[list[str]]) -> None:
    """What Triton 2.51 does with requests queued behind a busy instance (preferred sizes 2 and 4): the
    batch formed for the instance takes in the rest of the queue unless it stopped at a preferred size
    below the largest; no remainder is left to wait for the queue delay."""
    clock = FakeClock()
    batcher = former(clock, preferred_batch_sizes=(2, 4), max_queue_delay_us=500_000)
    for tag in queued:
        batcher.enqueue(make_request(tag=tag))
        clock.advance_us(15_000)
    taken = [ids(batch.requests) for batch in iter(batcher.next_batch, None)]
    assert taken == batches


def test_requests_with_different_shapes_never_share_a_batch() -> None:
    clock = FakeClock()
    batcher = former(clock, max_queue_delay_us=10_000)
    batcher.enqueue(make_request(width=4, tag="a"))
    batcher.enqueue(make_request(width=4, tag="b"))
    batcher.enqueue(make_request(width=5, tag="c"))
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch.requests), batch.reason) == (["a", "b"], CloseReason.SHAPE_CHANGE)


def test_ragged_inputs_may_share_a_batch() -> None:
    clock = FakeClock()
    batcher = former(clock, ragged_inputs=frozenset({"X"}))
    batcher.enqueue(make_request(width=4, tag="a"))
    batcher.enqueue(make_request(width=5, tag="b"))
    batch = batcher.next_batch()
    assert batch is not None
    assert ids(batch.requests) == ["a", "b"]


def test_higher_priority_goes_first() -> None:
    clock = FakeClock()
    batcher = former(clock, max_batch_size=2, priority_levels=3, default_priority_level=2)
    batcher.enqueue(make_request(priority=3, tag="low"))
    batcher.enqueue(make_request(priority=0, tag="default"))
    batcher.enqueue(make_request(priority=1, tag="high"))
    first = batcher.next_batch()
    second = batcher.next_batch()
    assert first is not None
    assert second is not None
    assert ids(first.requests) == ["high", "default"]
    assert ids(second.requests) == ["low"]


def test_the_largest_number_of_priority_levels_costs_only_the_levels_used() -> None:
    """Triton's QA loads priority_levels 2**64 - 1; a queue per level made up front never finished."""
    clock = FakeClock()
    batcher = former(clock, max_batch_size=4, priority_levels=2**64 - 1, default_priority_level=2**32)
    batcher.enqueue(make_request(priority=2**64 - 1, tag="last"))
    batcher.enqueue(make_request(priority=0, tag="default"))
    batcher.enqueue(make_request(priority=7, tag="seventh"))
    batch = batcher.next_batch()
    assert batch is not None
    assert ids(batch.requests) == ["seventh", "default", "last"]
    assert len(batcher) == 0


def test_full_queue_is_rejected_with_tritons_error() -> None:
    clock = FakeClock()
    batcher = former(clock, default_policy=QueuePolicy(max_queue_size=2), max_queue_delay_us=1000)
    batcher.enqueue(make_request())
    batcher.enqueue(make_request())
    with pytest.raises(NaiadError) as caught:
        batcher.enqueue(make_request())
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.UNAVAILABLE,
        "[request id: <id_unknown>] Exceeds maximum queue size",  # Triton's text, prefix and all
    )


def test_reject_timeout_removes_the_request_on_time() -> None:
    clock = FakeClock()
    policy = QueuePolicy(default_timeout_us=300)
    batcher = former(clock, default_policy=policy, max_queue_delay_us=10_000)
    batcher.enqueue(make_request(tag="a"))
    assert batcher.next_wakeup_ns() == 300 * US
    clock.advance_us(299)
    assert batcher.expire() == []
    clock.advance_us(1)
    assert ids(batcher.expire()) == ["a"]
    assert len(batcher) == 0


def test_request_timeout_can_only_shorten_when_override_is_allowed() -> None:
    assert QueuePolicy(default_timeout_us=300).timeout_us(100) == 300
    assert QueuePolicy(default_timeout_us=300, allow_timeout_override=True).timeout_us(100) == 100
    assert QueuePolicy(default_timeout_us=300, allow_timeout_override=True).timeout_us(900) == 300
    assert QueuePolicy(allow_timeout_override=True).timeout_us(900) == 900


def test_delay_timeout_moves_the_request_behind_the_others() -> None:
    clock = FakeClock()
    policy = QueuePolicy(timeout_action=TimeoutAction.DELAY, default_timeout_us=100, allow_timeout_override=True)
    batcher = former(clock, max_batch_size=1, default_policy=policy, max_queue_delay_us=0)
    batcher.enqueue(make_request(tag="a", timeout_us=50))
    batcher.enqueue(make_request(tag="b", timeout_us=1_000_000))
    clock.advance_us(60)
    assert batcher.expire() == []
    order = []
    while (batch := batcher.next_batch()) is not None:
        order.extend(ids(batch.requests))
    assert order == ["b", "a"]


def test_cancelled_requests_are_dropped_before_execution() -> None:
    clock = FakeClock()
    batcher = former(clock, max_queue_delay_us=1000)
    kept, cancelled = make_request(tag="kept"), make_request(tag="gone")
    batcher.enqueue(kept)
    batcher.enqueue(cancelled)
    cancelled.cancel()
    assert ids(batcher.drop_cancelled()) == ["gone"]
    clock.advance_us(1000)
    batch = batcher.next_batch()
    assert batch is not None
    assert ids(batch.requests) == ["kept"]


def test_non_batching_models_take_one_request_at_a_time() -> None:
    clock = FakeClock()
    batcher = former(clock, max_batch_size=0)
    batcher.enqueue(make_request(tag="a"))
    batcher.enqueue(make_request(tag="b"))
    batch = batcher.next_batch()
    assert batch is not None
    assert (ids(batch.requests), batch.reason) == (["a"], CloseReason.NO_BATCHING)


def test_flush_sends_everything_without_waiting() -> None:
    clock = FakeClock()
    batcher = former(clock, max_queue_delay_us=10_000)
    batcher.enqueue(make_request(tag="a"))
    batch = batcher.next_batch(flush=True)
    assert batch is not None
    assert batch.reason is CloseReason.FLUSH
