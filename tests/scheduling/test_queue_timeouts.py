"""Queue timeouts of any length, on worker threads and on the event loop: a timeout longer than a
thread can wait for (gRPC's int64 timeouts reach 2**63 µs) neither stops the others from expiring
on time nor keeps its own request from running."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from google.protobuf import text_format

from naiad.backend import (
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    InstanceRunner,
    ModelInstance,
    ResponseEvent,
    SchedulerContext,
    Tensor,
)
from naiad.errors import ErrorCode
from naiad.loop_thread import LoopThread
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling import DynamicScheduler, build_scheduler

from .test_loop_dispatch import CONFIG, request, wait_for

BATCHING = "dynamic_batching { default_queue_policy { timeout_action: REJECT allow_timeout_override: true } }"


class HeldOnThreads(ModelInstance):
    """Answers OUT = IN on a worker thread once ``release`` is set."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        self.batches.append([request.id for request in requests])
        self.release.wait(10)
        for each in requests:
            each.sender.send(InferenceResponse([Tensor("OUT", "FP32", each.inputs["IN"].data)]), final=True)


class HeldOnTheLoop(HeldOnThreads):
    async def execute(self, requests: Sequence[InferenceRequest]) -> None:  # type: ignore[override]
        self.batches.append([request.id for request in requests])
        await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 10)
        for each in requests:
            each.sender.send(InferenceResponse([Tensor("OUT", "FP32", each.inputs["IN"].data)]), final=True)


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    running = LoopThread("naiad-test-loop")
    yield running
    running.stop()


@pytest.mark.parametrize("kind", [HeldOnThreads, HeldOnTheLoop])
def test_a_timeout_past_what_a_thread_can_wait_leaves_the_others_on_time(
    loop: LoopThread, kind: type[HeldOnThreads]
) -> None:
    config = text_format.Parse(CONFIG + BATCHING, ModelConfig())
    instance = kind()
    runner = InstanceRunner(
        InstanceContext("m", 1, Path("m"), "m_0_0", "CPU", 0, config, "{}"), instance, decoupled=False, loop=loop.loop
    )
    scheduler = build_scheduler(
        SchedulerContext(
            model_name="m", version=1, model_dir=Path("m"), config=config, instances=[runner], decoupled=False
        )
    )
    assert isinstance(scheduler, DynamicScheduler)
    scheduler.start()
    events: list[ResponseEvent] = []
    scheduler.submit(request("running", events))
    wait_for(lambda: instance.batches == [["running"]])
    scheduler.submit(request("waits long", events, timeout_us=2**63 - 1))
    scheduler.submit(request("waits briefly", events, timeout_us=100_000))
    wait_for(lambda: len(events) == 1, timeout=2)  # answered on time, the instance still busy
    (timed_out,) = events
    assert timed_out.response is not None
    assert timed_out.response.error is not None
    assert timed_out.response.error.code is ErrorCode.UNAVAILABLE
    instance.release.set()
    wait_for(lambda: len(events) == 3)
    assert instance.batches == [["running"], ["waits long"]]
    scheduler.stop()
