"""The sequence scheduler's threads with a fake instance: stop finishes work, cancelled requests never run."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from google.protobuf import text_format

from naiad.backend import (
    SEQUENCE_END,
    SEQUENCE_START,
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
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling import SequenceScheduler, build_scheduler

CONFIG = """
    name: "m"
    max_batch_size: {mbs}
    input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
    output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
    sequence_batching {{ control_input [
      {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }} ] }} ] }}
"""


class Recorder(ModelInstance):
    """Answers OUT = IN; records (request id, READY) per batch; may hold execution until released."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, int]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        self.batches.append([(r.id, int(r.inputs["READY"].data.flatten()[0])) for r in requests])
        self.entered.set()
        self.gate.wait(10)
        for request in requests:
            output = Tensor("OUT", "FP32", request.inputs["IN"].data)
            request.sender.send(InferenceResponse([output]), final=True)


def scheduler(mbs: int = 0) -> tuple[SequenceScheduler, Recorder]:
    config = text_format.Parse(CONFIG.format(mbs=mbs), ModelConfig())
    instance = Recorder()
    context = InstanceContext("m", 1, Path("m"), "m_0_0", "CPU", 0, config, "{}")
    runner = InstanceRunner(context, instance, decoupled=False)
    built = build_scheduler(
        SchedulerContext(
            model_name="m", version=1, model_dir=Path("m"), config=config, instances=[runner], decoupled=False
        )
    )
    assert isinstance(built, SequenceScheduler)
    built.start()
    return built, instance


def request(correlation_id: int, flags: int, tag: str, events: list[ResponseEvent], rank: int = 1) -> InferenceRequest:
    shape = (1, 1) if rank == 2 else (1,)
    return InferenceRequest(
        model_name="m",
        model_version=1,
        inputs={"IN": Tensor("IN", "FP32", np.ones(shape, dtype=np.float32))},
        requested_outputs={"OUT": RequestedOutput("OUT")},
        sender=ResponseSender(events.append),
        id=tag,
        correlation_id=correlation_id,
        flags=flags,
    )


def test_stop_runs_queued_and_backlogged_sequences_first() -> None:
    batcher, instance = scheduler()
    events: list[ResponseEvent] = []
    batcher.submit(request(1, SEQUENCE_START, "a0", events))
    batcher.submit(request(2, SEQUENCE_START, "b0", events))  # one slot: waits in the backlog
    batcher.submit(request(1, 0, "a1", events))
    batcher.stop()
    assert [batch[0][0] for batch in instance.batches] == ["a0", "a1", "b0"]
    assert len(events) == 3
    assert all(event.final and event.response and event.response.error is None for event in events)
    assert batcher.batch_sizes == {1: 3}


def test_cancelled_queued_requests_are_answered_and_never_executed() -> None:
    batcher, instance = scheduler()
    instance.gate.clear()
    events: list[ResponseEvent] = []
    batcher.submit(request(1, SEQUENCE_START, "a0", events))
    assert instance.entered.wait(5)
    queued = request(1, 0, "a1", events)
    batcher.submit(queued)
    queued.cancel()
    instance.gate.set()
    batcher.stop()
    assert [batch[0][0] for batch in instance.batches] == ["a0"]
    errors = [event.response.error for event in events if event.response and event.response.error]
    assert [(error.code, error.message) for error in errors] == [(ErrorCode.CANCELLED, "Request was cancelled")]


def test_direct_batches_are_padded_and_counted_by_rows() -> None:
    batcher, instance = scheduler(mbs=4)
    instance.gate.clear()
    events: list[ResponseEvent] = []
    batcher.submit(request(1, SEQUENCE_START, "a0", events, rank=2))
    assert instance.entered.wait(5)
    batcher.submit(request(2, SEQUENCE_START, "b0", events, rank=2))
    batcher.submit(request(2, SEQUENCE_END, "b1", events, rank=2))
    instance.gate.set()
    batcher.stop()
    assert instance.batches == [[("a0", 1)], [("", 0), ("b0", 1)], [("", 0), ("b1", 1)]]
    assert batcher.batch_sizes == {1: 1, 2: 2}
    assert len(events) == 3
