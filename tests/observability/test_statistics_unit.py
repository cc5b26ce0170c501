"""ModelStatistics, its pipeline stage and the instance runner: exact counts for every path a request can take."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import (
    InferenceRequest,
    InferenceResponse,
    InstanceContext,
    ModelInstance,
    RequestedOutput,
    ResponseSender,
)
from naiad.errors import ErrorCode, NaiadError
from naiad.pipeline import build_pipeline
from naiad.protocol.model_config_pb2 import ModelConfig, ModelInput, ModelOutput
from naiad.scheduling.execution import InstanceRunner
from naiad.statistics import ModelStatistics, StatisticsOptions, quantile_values
from naiad.tensor import Tensor
from naiad.tensor_instance import TensorInstance


class Echo(ModelInstance):
    """Answers every request with an empty response after ``delay`` seconds; fails on request id 'bad'."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        time.sleep(self.delay)
        for request in requests:
            if request.id == "bad":
                request.sender.send(InferenceResponse(error=NaiadError("no", ErrorCode.INTERNAL)), final=True)
            else:
                request.sender.send(InferenceResponse(), final=True)


class Raises(ModelInstance):
    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        raise RuntimeError("boom")


def _request(
    stats: ModelStatistics, *, batch_size: int = 1, request_id: str = "", track: bool = True
) -> InferenceRequest:
    """A request whose responses pass the statistics stage; tracked as the data plane would."""
    sender = ResponseSender(lambda event: None, build_pipeline([stats.stage()]))
    request = InferenceRequest(
        "m", 1, {}, {"OUT": RequestedOutput("OUT")}, sender, id=request_id, batch_size=batch_size
    )
    if track:
        stats.track(request)
    return request


def _runner(instance: ModelInstance, stats: ModelStatistics, *, decoupled: bool = False) -> InstanceRunner:
    context = InstanceContext("m", 1, Path("m"), "m_0", "CPU", 0, ModelConfig(name="m"), "{}")
    return InstanceRunner(context, instance, decoupled=decoupled, statistics=stats)


def test_successes_count_batches_rows_and_phases_that_add_up() -> None:
    stats = ModelStatistics("m", 1)
    instance = _runner(Echo(delay=0.01), stats)
    first, second = _request(stats, batch_size=2), _request(stats, batch_size=3)
    assert (stats.snapshot().pending, stats.snapshot().in_flight) == (2, 2)
    time.sleep(0.005)
    instance.execute([first, second])
    third = _request(stats)
    instance.execute([third])
    snapshot = stats.snapshot()
    assert (snapshot.pending, snapshot.in_flight) == (0, 0)
    assert snapshot.success.count == 3
    assert snapshot.fail.count == 0
    assert snapshot.inference_count == 6
    assert snapshot.execution_count == 2
    assert [(b.batch_size, b.compute_infer.count) for b in snapshot.batches] == [(1, 1), (5, 1)]
    assert snapshot.queue.count == snapshot.compute_infer.count == 3
    # Each request's phases add up to its duration, so the sums do too.
    phases = snapshot.queue.ns + snapshot.compute_input.ns + snapshot.compute_infer.ns + snapshot.compute_output.ns
    assert snapshot.success.ns == phases
    assert snapshot.queue.ns >= 2 * 5_000_000  # the first two waited 5 ms before executing
    assert snapshot.compute_infer.ns >= 2 * 10_000_000  # ... and the batch took 10 ms
    assert snapshot.last_inference_ms > 0
    body = snapshot.to_json()
    assert body["inference_stats"]["success"] == {"count": 3, "ns": snapshot.success.ns}
    assert set(body["inference_stats"]) == {
        "success",
        "fail",
        "queue",
        "compute_input",
        "compute_infer",
        "compute_output",
        "cache_hit",
        "cache_miss",
    }
    assert body["batch_stats"][1]["batch_size"] == 5
    assert body["response_stats"] == {}
    assert body["memory_usage"] == []


def test_each_failure_reason() -> None:
    stats = ModelStatistics("m", 1)
    # BACKEND: the model answered with an error, or raised.
    bad = _request(stats, request_id="bad")
    _runner(Echo(), stats).execute([bad])
    raised = _request(stats)
    _runner(Raises(), stats).execute([raised])
    # REJECTED: refused by the scheduler's submit, or timed out in its queue (never started).
    refused = _request(stats, track=False)
    stats.refused(stats.track(refused), NaiadError("Exceeds maximum queue size", ErrorCode.UNAVAILABLE))
    expired = _request(stats)
    expired.sender.send(
        InferenceResponse(error=NaiadError("Request timeout expired", ErrorCode.UNAVAILABLE)), final=True
    )
    # CANCELED: dropped from the queue after the client went away.
    cancelled = _request(stats)
    cancelled.cancel()
    cancelled.sender.send(InferenceResponse(error=NaiadError("Request was cancelled", ErrorCode.CANCELLED)), final=True)
    # OTHER: refused for another reason before it started.
    other = _request(stats, track=False)
    stats.refused(stats.track(other), NaiadError("something else", ErrorCode.INTERNAL))
    snapshot = stats.snapshot()
    assert snapshot.failures == {"REJECTED": 2, "CANCELED": 1, "BACKEND": 2, "OTHER": 1}
    assert snapshot.fail.count == 6
    assert snapshot.fail.ns > 0
    assert snapshot.success.count == snapshot.inference_count == 0
    assert snapshot.execution_count == 2  # failed executions count, as in Triton
    assert (snapshot.pending, snapshot.in_flight) == (0, 0)


def test_an_untracked_request_only_counts_its_execution() -> None:
    stats = ModelStatistics("m", 1)
    _runner(Echo(), stats).execute([_request(stats, batch_size=4, track=False)])
    snapshot = stats.snapshot()
    assert (snapshot.execution_count, snapshot.success.count) == (1, 0)
    assert snapshot.batches[0].batch_size == 4


class Streamer(ModelInstance):
    """Decoupled: answers from a thread after execute returned: 3 responses 10 ms apart, then a flag-only final."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for request in requests:
            thread = threading.Thread(target=self._answer, args=(request,))
            thread.start()
            self.threads.append(thread)

    @staticmethod
    def _answer(request: InferenceRequest) -> None:
        for _ in range(3):
            time.sleep(0.01)
            request.sender.send(InferenceResponse())
        request.sender.send(final=True)


def test_decoupled_requests_complete_at_their_final_response() -> None:
    stats = ModelStatistics("m", 1, decoupled=True, options=StatisticsOptions(histogram_latencies=True))
    backend = Streamer()
    request = _request(stats)
    _runner(backend, stats, decoupled=True).execute([request])
    assert stats.snapshot().success.count == 0  # still streaming
    for thread in backend.threads:
        thread.join()
    snapshot = stats.snapshot()
    assert snapshot.success.count == 1
    assert snapshot.execution_count == 1
    assert snapshot.compute_infer.ns >= 30_000_000  # runs until the final response
    assert snapshot.success.ns == snapshot.queue.ns + snapshot.compute_infer.ns
    assert [(r.success.count, r.empty_response.count) for r in snapshot.responses] == [(1, 0), (1, 0), (1, 0), (0, 1)]
    assert all(r.success.ns >= 5_000_000 for r in snapshot.responses[:3])
    assert snapshot.time_to_first_response is not None
    assert snapshot.time_to_first_response.count == 1
    assert snapshot.time_between_responses is not None
    assert snapshot.time_between_responses.count == 2
    assert snapshot.first_response_ms is not None
    assert snapshot.first_response_ms.count == 1
    assert set(snapshot.to_json()["response_stats"]) == {"0", "1", "2", "3"}


class Doubler(TensorInstance):
    def run(self, inputs: dict[str, npt.NDArray[Any]]) -> Mapping[str, npt.NDArray[Any]]:
        time.sleep(0.002)
        return {"Y": inputs["X"] * 2}


def test_tensor_instances_report_input_and_output_phases() -> None:
    config = ModelConfig(
        name="doubler",
        max_batch_size=8,
        input=[ModelInput(name="X", data_type=11, dims=[2])],
        output=[ModelOutput(name="Y", data_type=11, dims=[2])],
    )
    stats = ModelStatistics("doubler", 1)
    requests = [
        InferenceRequest(
            "doubler",
            1,
            {"X": Tensor("X", "FP32", np.ones((rows, 2), dtype=np.float32))},
            {"Y": RequestedOutput("Y")},
            ResponseSender(lambda event: None, build_pipeline([stats.stage()])),
            batch_size=rows,
        )
        for rows in (1, 2)
    ]
    for request in requests:
        stats.track(request)
    _runner(Doubler(config), stats).execute(requests)
    snapshot = stats.snapshot()
    assert snapshot.compute_input.ns > 0
    assert snapshot.compute_output.ns > 0
    assert snapshot.compute_infer.ns >= 2 * 2_000_000
    assert snapshot.batches[0].batch_size == 3
    assert snapshot.batches[0].compute_input.ns > 0
    assert snapshot.success.ns == (
        snapshot.queue.ns + snapshot.compute_input.ns + snapshot.compute_infer.ns + snapshot.compute_output.ns
    )


def test_summaries_keep_configured_quantiles() -> None:
    options = StatisticsOptions(summary_latencies=True, summary_quantiles=((0.5, 0.05), (0.99, 0.001)))
    stats = ModelStatistics("m", 1, options=options)
    instance = _runner(Echo(), stats)
    for _ in range(10):
        instance.execute([_request(stats)])
    summary = stats.snapshot().summaries_us["request"]
    assert summary.count == 10
    assert summary.sum > 0
    assert [q for q, _ in summary.quantiles] == [0.5, 0.99]
    assert all(value > 0 for _, value in summary.quantiles)


def test_quantiles_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert quantile_values(values, ((0.5, 0.0), (0.9, 0.0), (0.999, 0.0))) == ((0.5, 50.0), (0.9, 90.0), (0.999, 100.0))
    empty = quantile_values([], ((0.5, 0.0),))
    assert empty[0][0] == 0.5
    assert empty[0][1] != empty[0][1]


def test_histograms_bucket_first_responses_in_milliseconds() -> None:
    stats = ModelStatistics(
        "m", 1, options=StatisticsOptions(histogram_latencies=True), first_response_buckets_ms=(1, 50)
    )
    _runner(Echo(delay=0.005), stats).execute([_request(stats)])
    histogram = stats.snapshot().first_response_ms
    assert histogram is not None
    assert histogram.bounds == (1.0, 50.0)
    assert histogram.cumulative == (0, 1, 1)  # 5 ms: above 1 ms, within 50 ms
    assert histogram.sum >= 5.0


class RacingAnswer(ModelInstance):
    """Answers from another thread, racing the end of ``execute`` (sometimes before, sometimes after)."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def execute(self, requests: Sequence[InferenceRequest]) -> None:
        for request in requests:
            thread = threading.Thread(target=request.sender.send, args=(InferenceResponse(),), kwargs={"final": True})
            thread.start()
            self.threads.append(thread)


def test_a_final_flag_racing_the_end_of_execute_is_counted_exactly_once() -> None:
    stats = ModelStatistics("m", 1)
    backend = RacingAnswer()
    instance = _runner(backend, stats, decoupled=True)
    workers = []
    for _ in range(4):

        def work() -> None:
            for _ in range(300):
                instance.execute([_request(stats)])

        workers.append(threading.Thread(target=work))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for thread in backend.threads:
        thread.join()
    snapshot = stats.snapshot()
    assert snapshot.success.count == snapshot.execution_count == 1200
    assert snapshot.in_flight == 0
    assert not stats.open_requests


def test_metric_counters_go_on_across_reloads_holding_one_replaced_version() -> None:
    """Each reload's statistics start from zero; their metric counters add those of every version
    before, of which only the one just replaced stays referenced."""
    versions = [ModelStatistics("m", 1) for _ in range(3)]
    for generation, stats in enumerate(versions):
        if generation:
            stats.follow(versions[generation - 1])
        runner = _runner(Echo(), stats)
        runner.execute([_request(stats) for _ in range(generation + 1)])
        assert stats.snapshot().success.count == generation + 1
    latest = versions[-1].metric_counters()
    assert (latest.success.count, latest.inference_count, latest.execution_count) == (6, 6, 3)
    assert versions[1].metric_counters().success.count == 2  # its own: what it carried went to the latest
