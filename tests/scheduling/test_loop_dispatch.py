"""Async instances get their batches on the event loop: no worker thread, batches formed as with threads,
queue delays and timeouts kept, and everything accepted runs before a stop returns."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from naiad.backend import (
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    InstanceRunner,
    ModelInstance,
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
    SchedulerContext,
    Tensor,
)
from naiad.errors import ErrorCode
from naiad.loop_thread import LoopThread
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling import DirectScheduler, DynamicScheduler, build_scheduler
from naiad.scheduling.base import Scheduler

CONFIG = """
    name: "m"
    max_batch_size: 8
    input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
    output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


class AsyncRecorder(ModelInstance):
    """Answers OUT = IN after ``hold`` is set; records each batch's request ids and the thread it ran on."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[str] = set()
        self.hold: asyncio.Event | None = None  # created on the loop by the test when it wants to hold

    async def execute(self, requests: Sequence[InferenceRequest]) -> None:
        self.batches.append([request.id for request in requests])
        self.threads.add(threading.current_thread().name)
        if self.hold is not None:
            await self.hold.wait()
        for request in requests:
            output = Tensor("OUT", "FP32", request.inputs["IN"].data)
            request.sender.send(InferenceResponse([output]), final=True)


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    running = LoopThread("naiad-test-loop")
    yield running
    running.stop()


def scheduler(loop: LoopThread, batching: str = "", instances: int = 1) -> tuple[Scheduler, list[AsyncRecorder]]:
    config = text_format.Parse(CONFIG + batching, ModelConfig())
    recorders = [AsyncRecorder() for _ in range(instances)]
    runners = [
        InstanceRunner(
            InstanceContext("m", 1, Path("m"), f"m_0_{index}", "CPU", 0, config, "{}"),
            recorder,
            decoupled=False,
            loop=loop.loop,
        )
        for index, recorder in enumerate(recorders)
    ]
    built = build_scheduler(
        SchedulerContext(
            model_name="m", version=1, model_dir=Path("m"), config=config, instances=runners, decoupled=False
        )
    )
    built.start()
    return built, recorders


def request(tag: str, events: list[ResponseEvent], **fields: int) -> InferenceRequest:
    return InferenceRequest(
        model_name="m",
        model_version=1,
        inputs={"IN": Tensor("IN", "FP32", np.ones((1, 1), dtype=np.float32))},
        requested_outputs={"OUT": RequestedOutput("OUT")},
        sender=ResponseSender(events.append),
        id=tag,
        batch_size=1,
        **fields,
    )


def submit_on_loop(loop: LoopThread, target: Scheduler, requests: Sequence[InferenceRequest]) -> None:
    """Submit in one turn of the loop, as requests parsed from one read of the network are."""

    async def submit_all() -> None:
        for each in requests:
            target.submit(each)

    asyncio.run_coroutine_threadsafe(submit_all(), loop.loop).result(5)


def wait_for(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_batches_run_on_the_loop_thread_with_no_worker_thread(loop: LoopThread) -> None:
    before = {thread.name for thread in threading.enumerate()}
    built, (recorder,) = scheduler(loop, "dynamic_batching { }")
    assert isinstance(built, DynamicScheduler)
    assert {thread.name for thread in threading.enumerate()} == before
    events: list[ResponseEvent] = []
    built.submit(request("a", events))  # from this thread: the loop still runs it
    wait_for(lambda: len(events) == 1)
    assert recorder.threads == {"naiad-test-loop"}
    built.stop()


def test_requests_submitted_in_one_turn_of_the_loop_share_a_batch(loop: LoopThread) -> None:
    built, (recorder,) = scheduler(loop, "dynamic_batching { }")
    events: list[ResponseEvent] = []
    submit_on_loop(loop, built, [request(str(index), events) for index in range(5)])
    wait_for(lambda: len(events) == 5)
    assert recorder.batches == [["0", "1", "2", "3", "4"]]
    assert all(event.final and event.response is not None and event.response.error is None for event in events)
    built.stop()


def test_the_queue_delay_holds_a_batch_open_then_runs_it(loop: LoopThread) -> None:
    built, (recorder,) = scheduler(loop, "dynamic_batching { max_queue_delay_microseconds: 200000 }")
    events: list[ResponseEvent] = []
    started = time.monotonic()
    built.submit(request("first", events))
    time.sleep(0.05)
    built.submit(request("second", events))
    wait_for(lambda: len(events) == 2)
    assert time.monotonic() - started >= 0.19
    assert recorder.batches == [["first", "second"]]
    built.stop()


def test_a_queued_request_times_out_while_the_only_instance_is_busy(loop: LoopThread) -> None:
    built, (recorder,) = scheduler(
        loop,
        "dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 100000 } }",
    )
    recorder.hold = asyncio.run_coroutine_threadsafe(_event(), loop.loop).result()
    events: list[ResponseEvent] = []
    built.submit(request("running", events))
    wait_for(lambda: recorder.batches == [["running"]])
    built.submit(request("queued", events))
    wait_for(lambda: len(events) == 1, timeout=2)  # answered on time, the instance still busy
    (timed_out,) = events
    assert timed_out.response is not None
    assert timed_out.response.error is not None
    assert timed_out.response.error.code is ErrorCode.UNAVAILABLE
    loop.loop.call_soon_threadsafe(recorder.hold.set)
    wait_for(lambda: len(events) == 2)
    built.stop()


def test_two_instances_run_two_batches_at_once(loop: LoopThread) -> None:
    built, recorders = scheduler(loop, instances=2)
    assert isinstance(built, DirectScheduler)
    gate = asyncio.run_coroutine_threadsafe(_event(), loop.loop).result()
    for recorder in recorders:
        recorder.hold = gate
    events: list[ResponseEvent] = []
    built.submit(request("a", events))
    built.submit(request("b", events))
    wait_for(lambda: all(recorder.batches for recorder in recorders))  # both began before either ended
    loop.loop.call_soon_threadsafe(gate.set)
    wait_for(lambda: len(events) == 2)
    built.stop()


def test_stop_runs_everything_accepted_before_it_returns(loop: LoopThread) -> None:
    built, (recorder,) = scheduler(loop, "dynamic_batching { max_queue_delay_microseconds: 10000000 }")
    events: list[ResponseEvent] = []
    for index in range(3):  # would wait 10 s for a fuller batch
        built.submit(request(str(index), events))
    built.stop()
    assert len(events) == 3
    assert recorder.batches == [["0", "1", "2"]]


def test_a_request_cancelled_in_the_queue_never_runs(loop: LoopThread) -> None:
    built, (recorder,) = scheduler(loop)
    recorder.hold = asyncio.run_coroutine_threadsafe(_event(), loop.loop).result()
    events: list[ResponseEvent] = []
    built.submit(request("running", events))
    wait_for(lambda: recorder.batches == [["running"]])
    cancelled = request("cancelled", events)
    built.submit(cancelled)
    cancelled.cancel()
    loop.loop.call_soon_threadsafe(recorder.hold.set)
    wait_for(lambda: len(events) == 2)
    assert recorder.batches == [["running"]]
    assert events[1].response is not None
    assert events[1].response.error is not None
    assert events[1].response.error.code is ErrorCode.CANCELLED
    built.stop()


async def _event() -> asyncio.Event:
    return asyncio.Event()
