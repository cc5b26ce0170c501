"""Known numbers of requests over HTTP and gRPC; the statistics extension and the metrics count them exactly."""

from __future__ import annotations

import queue
import threading
import urllib.error
import urllib.request
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

from .conftest import eventually, get_json, metrics_text, model_stats

DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss")


def _add_sub(module: Any, batch: int | None = None) -> list[Any]:
    shape = [4] if batch is None else [batch, 4]
    inputs = [module.InferInput("INPUT0", shape, "FP32"), module.InferInput("INPUT1", shape, "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(shape, dtype=np.float32))
    return inputs


def _slow(module: Any) -> list[Any]:
    tensor = module.InferInput("INPUT0", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 1), dtype=np.float32))
    return [tensor]


def _samples(server: ServerProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the metrics text: (sample name, labels) -> value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics_text(server))
        for sample in family.samples
    }


def _value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, model: str, **labels: str) -> float:
    key = frozenset({"model": model, "version": "1", **labels}.items())
    for candidate in (name, name + "_total"):  # the parser names counter samples <name>_total
        if (candidate, key) in samples:
            return samples[(candidate, key)]
    raise KeyError(f"{name}{dict(key)} not in the metrics")


def _check_sanity(stats: dict[str, Any]) -> None:
    inference = stats["inference_stats"]
    assert set(inference) == set(DURATIONS)
    for entry in inference.values():
        assert isinstance(entry["count"], int)
        assert isinstance(entry["ns"], int)
    success = inference["success"]
    if success["count"]:
        assert success["ns"] > 0
        assert inference["compute_infer"]["ns"] > 0
        assert inference["queue"]["ns"] <= success["ns"]
        phases = sum(inference[key]["ns"] for key in ("queue", "compute_input", "compute_infer", "compute_output"))
        assert phases == success["ns"]  # each request's phases add up to its duration
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inference[key]["count"] == success["count"]
    assert sum(batch["compute_infer"]["count"] for batch in stats["batch_stats"]) == stats["execution_count"]


def _check_metrics_match(server: ServerProcess, model: str, stats: dict[str, Any]) -> None:
    samples = _samples(server)
    inference = stats["inference_stats"]
    assert _value(samples, "nv_inference_request_success", model) == inference["success"]["count"]
    assert _value(samples, "nv_inference_count", model) == stats["inference_count"]
    assert _value(samples, "nv_inference_exec_count", model) == stats["execution_count"]
    failures = sum(
        _value(samples, "nv_inference_request_failure", model, reason=reason)
        for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER")
    )
    assert failures == inference["fail"]["count"]
    for family, key in (
        ("nv_inference_request_duration_us", "success"),
        ("nv_inference_queue_duration_us", "queue"),
        ("nv_inference_compute_input_duration_us", "compute_input"),
        ("nv_inference_compute_infer_duration_us", "compute_infer"),
        ("nv_inference_compute_output_duration_us", "compute_output"),
    ):
        assert _value(samples, family, model) == inference[key]["ns"] // 1000


def test_successes_and_failures_over_http_and_grpc(server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    for _ in range(5):
        http.infer("counted", _add_sub(httpclient))
    for _ in range(3):
        grpc.infer("counted", _add_sub(grpcclient))
    # Validation errors are not counted anywhere, as in Triton.
    with pytest.raises(InferenceServerException):
        http.infer("counted", _add_sub(httpclient)[:1])
    with pytest.raises(InferenceServerException):
        grpc.infer("counted", _add_sub(grpcclient)[:1])
    failing = httpclient.InferInput("INPUT0", [3], "FP32")
    failing.set_data_from_numpy(np.ones(3, dtype=np.float32))
    for _ in range(2):
        with pytest.raises(InferenceServerException):
            http.infer("raises", [failing])
    grpc_failing = grpcclient.InferInput("INPUT0", [3], "FP32")
    grpc_failing.set_data_from_numpy(np.ones(3, dtype=np.float32))
    with pytest.raises(InferenceServerException):
        grpc.infer("raises", [grpc_failing])

    eventually(lambda: model_stats(server, "counted")["inference_stats"]["success"]["count"] == 8)
    eventually(lambda: model_stats(server, "raises")["execution_count"] == 3)
    counted = model_stats(server, "counted")
    assert counted["name"] == "counted"
    assert counted["version"] == "1"
    assert counted["inference_count"] == counted["execution_count"] == 8
    assert counted["inference_stats"]["fail"] == {"count": 0, "ns": 0}
    assert [batch["batch_size"] for batch in counted["batch_stats"]] == [1]
    assert counted["last_inference"] > 1_600_000_000_000  # ms since the epoch
    _check_sanity(counted)
    _check_metrics_match(server, "counted", counted)

    raised = model_stats(server, "raises")
    assert raised["inference_stats"]["fail"]["count"] == 3
    assert raised["inference_stats"]["fail"]["ns"] > 0
    assert raised["inference_stats"]["success"]["count"] == raised["inference_count"] == 0
    _check_sanity(raised)
    _check_metrics_match(server, "raises", raised)
    samples = _samples(server)
    assert _value(samples, "nv_inference_request_failure", "raises", reason="BACKEND") == 3
    assert _value(samples, "nv_inference_request_failure", "raises", reason="OTHER") == 0

    # gRPC ModelStatistics carries the same numbers.
    response = grpc.get_inference_statistics("counted")
    (entry,) = response.model_stats
    assert (entry.name, entry.version, entry.inference_count) == ("counted", "1", 8)
    assert entry.inference_stats.success.count == 8
    assert entry.inference_stats.success.ns == counted["inference_stats"]["success"]["ns"]
    assert entry.inference_stats.queue.ns == counted["inference_stats"]["queue"]["ns"]
    assert [(b.batch_size, b.compute_infer.count) for b in entry.batch_stats] == [(1, 8)]
    assert grpc.get_inference_statistics("raises").model_stats[0].inference_stats.fail.count == 3


def test_a_step_that_raises_in_an_ensemble_counts_as_a_backend_failure(server: ServerProcess) -> None:
    """As in Triton: the step's failure is BACKEND (the ensemble ending its other work because of it
    does not make it a cancellation); the ensemble's is OTHER, once per request."""
    http = httpclient.InferenceServerClient(server.http_url)
    failing = httpclient.InferInput("INPUT0", [3], "FP32")
    failing.set_data_from_numpy(np.ones(3, dtype=np.float32))
    for _ in range(2):
        with pytest.raises(InferenceServerException, match="cannot handle this input"):
            http.infer("failing_pipeline", [failing])
    eventually(lambda: model_stats(server, "raises_in_pipeline")["inference_stats"]["fail"]["count"] == 2)
    samples = _samples(server)
    assert _value(samples, "nv_inference_request_failure", "raises_in_pipeline", reason="BACKEND") == 2
    assert _value(samples, "nv_inference_request_failure", "raises_in_pipeline", reason="CANCELED") == 0
    assert _value(samples, "nv_inference_request_failure", "failing_pipeline", reason="OTHER") == 2


def test_every_model_and_the_lookup_errors(server: ServerProcess) -> None:
    every = get_json(f"http://{server.http_url}/v2/models/stats")["model_stats"]
    names = [entry["name"] for entry in every]
    assert names == sorted(names)
    assert {"counted", "stream", "untouched"} <= set(names)
    assert (
        get_json(f"http://{server.http_url}/v2/models/untouched/versions/1/stats")["model_stats"][0]["version"] == "1"
    )
    for path, message in (
        ("/v2/models/nope/stats", "requested model 'nope' is not available"),
        ("/v2/models/untouched/versions/7/stats", "requested model version is not available for model 'untouched'"),
    ):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"http://{server.http_url}{path}", timeout=10)
        assert caught.value.code == 400
        assert caught.value.read() == ('{"error":"' + message + '"}').encode()
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    assert len(grpc.get_inference_statistics().model_stats) == len(every)
    with pytest.raises(InferenceServerException) as refused:
        grpc.get_inference_statistics("nope")
    assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException) as bad_version:
        grpc.get_inference_statistics("untouched", "x")
    assert bad_version.value.status() == "StatusCode.INVALID_ARGUMENT"
    metadata = httpclient.InferenceServerClient(server.http_url).get_server_metadata()
    assert metadata["extensions"][-3:] == ["statistics", "trace", "logging"]  # as Triton lists them
    assert "statistics" in grpc.get_server_metadata().extensions


def test_batches_count_rows_and_executions(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)
    pending = [client.async_infer("batched", _add_sub(httpclient, batch=2)) for _ in range(4)]
    for request in pending:
        request.get_result()
    eventually(lambda: model_stats(server, "batched")["inference_stats"]["success"]["count"] == 4)
    stats = model_stats(server, "batched")
    assert stats["inference_count"] == 8
    assert sum(b["batch_size"] * b["compute_infer"]["count"] for b in stats["batch_stats"]) == 8
    assert 1 <= stats["execution_count"] <= 4
    _check_sanity(stats)
    _check_metrics_match(server, "batched", stats)
    samples = _samples(server)
    labels = {"model": "batched", "version": "1"}
    assert samples[("naiad_inference_batch_size_count", frozenset(labels.items()))] == stats["execution_count"]
    assert samples[("naiad_inference_batch_size_sum", frozenset(labels.items()))] == 8


def _queue_gauges(server: ServerProcess, model: str) -> tuple[float, float]:
    samples = _samples(server)
    return _value(samples, "nv_inference_pending_request_count", model), _value(
        samples, "naiad_inference_queue_depth", model
    )


def test_a_full_queue_rejects_and_the_pending_gauge_sees_the_queue(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=2)
    # The first request runs long enough for the gauges to be read while it does, on a busy machine too.
    first = client.async_infer("slow_full", _slow(httpclient), parameters={"sleep": 3.0})
    eventually(lambda: _queue_gauges(server, "slow_full") == (0, 1))  # executing, nothing waits
    second = client.async_infer("slow_full", _slow(httpclient), parameters={"sleep": 0.1})
    eventually(lambda: _queue_gauges(server, "slow_full") == (1, 2))  # one waits in the queue
    with pytest.raises(InferenceServerException) as caught:
        httpclient.InferenceServerClient(server.http_url).infer("slow_full", _slow(httpclient))
    assert caught.value.status() == "503"
    first.get_result()
    second.get_result()
    eventually(lambda: model_stats(server, "slow_full")["inference_stats"]["success"]["count"] == 2)
    stats = model_stats(server, "slow_full")
    assert stats["inference_stats"]["fail"]["count"] == 1
    assert _value(_samples(server), "nv_inference_request_failure", "slow_full", reason="REJECTED") == 1
    assert _queue_gauges(server, "slow_full") == (0, 0)
    _check_sanity(stats)
    # The second request waited for the first: its queue time shows.
    assert stats["inference_stats"]["queue"]["ns"] > 500_000_000


def test_a_queue_timeout_is_rejected(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=2)
    first = client.async_infer("slow_timeout", _slow(httpclient), parameters={"sleep": 3.0})
    eventually(lambda: _queue_gauges(server, "slow_timeout") == (0, 1))
    with pytest.raises(InferenceServerException) as caught:
        httpclient.InferenceServerClient(server.http_url).infer("slow_timeout", _slow(httpclient))
    assert caught.value.status() == "503"
    first.get_result()
    eventually(lambda: model_stats(server, "slow_timeout")["inference_stats"]["success"]["count"] == 1)
    samples = _samples(server)
    assert _value(samples, "nv_inference_request_failure", "slow_timeout", reason="REJECTED") == 1
    assert model_stats(server, "slow_timeout")["inference_stats"]["fail"]["count"] == 1


def test_a_request_cancelled_in_the_model_that_answers_it_counts_as_served(server: ServerProcess) -> None:
    """Triton 2.51 side by side: the model saw the cancellation and answered CANCELLED; its python
    backend counts the request a success (only an ``execute`` that raises fails one)."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException):
        client.infer("slow_cancel", _slow_flat(), parameters={"sleep": 10}, client_timeout=0.5)
    eventually(lambda: model_stats(server, "slow_cancel")["inference_stats"]["success"]["count"] == 1)
    stats = model_stats(server, "slow_cancel")
    assert stats["inference_stats"]["fail"]["count"] == 0
    assert (stats["inference_count"], stats["execution_count"]) == (1, 1)
    samples = _samples(server)
    assert _value(samples, "nv_inference_request_success", "slow_cancel") == 1
    assert _value(samples, "nv_inference_request_failure", "slow_cancel", reason="CANCELED") == 0


def _slow_flat() -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, dtype=np.float32))
    return [tensor]


def test_streaming_responses_are_counted_per_index(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: queue.Queue[Any] = queue.Queue()
    finals = threading.Semaphore(0)

    def callback(result: Any, error: Any) -> None:
        answers.put(result or error)
        if result is not None and result.get_response().parameters["triton_final_response"].bool_param:
            finals.release()

    client.start_stream(callback=callback)
    for _ in range(2):
        count = grpcclient.InferInput("IN", [1], "INT32")
        count.set_data_from_numpy(np.array([3], dtype=np.int32))
        client.async_stream_infer("stream", [count], enable_empty_final_response=True)
    for _ in range(2):
        assert finals.acquire(timeout=30)
    client.stop_stream()
    eventually(lambda: model_stats(server, "stream")["inference_stats"]["success"]["count"] == 2)
    stats = model_stats(server, "stream")
    assert stats["inference_count"] == 2
    assert stats["execution_count"] == 2
    responses = stats["response_stats"]
    assert sorted(responses) == ["0", "1", "2", "3"]
    for index in ("0", "1", "2"):
        assert responses[index]["success"]["count"] == 2
        assert responses[index]["success"]["ns"] > 0
    assert responses["3"]["empty_response"]["count"] == 2
    assert stats["inference_stats"]["compute_infer"]["ns"] >= 2 * 30_000_000  # until each final response
    _check_sanity(stats)
    samples = _samples(server)
    labels = frozenset({"model": "stream", "version": "1"}.items())
    assert samples[("naiad_inference_time_to_first_response_seconds_count", labels)] == 2
    assert samples[("naiad_inference_time_between_responses_seconds_count", labels)] == 4
    grpc_stats = client.get_inference_statistics("stream").model_stats[0]
    assert grpc_stats.response_stats["1"].success.count == 2
