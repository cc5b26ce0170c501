"""The response cache end to end: ``--cache-config local,size=N`` and ``response_cache { enable: true }``.

Every model here counts its executions in its ``CALLS`` output, so a response from the cache is
told apart from a new one by its count; each test sends data of its own, so that the tests share
one server and its cache.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server
from naiad.testing.process import ServerStartError

from .observability.conftest import eventually, metrics_text

# OUT = IN * 2, EXTRA = IN + 1, CALLS = this instance's executions so far; an input below 0 answers an error.
COUNTER = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            self.calls += 1
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if data.size and data.flat[0] < 0:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
                continue
            calls = np.full((data.shape[0], 1), self.calls, dtype=np.int64)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", (data * 2).astype(np.float32)),
                pb_utils.Tensor("EXTRA", (data + 1).astype(np.float32)),
                pb_utils.Tensor("CALLS", calls),
            ]))
        return responses
"""

COUNTER_CONFIG = """
backend: "python"
max_batch_size: 8
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ -1 ] }},
        {{ name: "TAG" data_type: TYPE_STRING dims: [ 1 ] optional: true }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }},
         {{ name: "EXTRA" data_type: TYPE_FP32 dims: [ -1 ] }},
         {{ name: "CALLS" data_type: TYPE_INT64 dims: [ 1 ] }} ]
dynamic_batching {{ }}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{cache}
"""

ENSEMBLE_CONFIG = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "CALLS" data_type: TYPE_INT64 dims: [ 1 ] } ]
ensemble_scheduling { step [ {
  model_name: "step" model_version: -1
  input_map { key: "IN" value: "IN" }
  output_map [ { key: "OUT" value: "OUT" }, { key: "CALLS" value: "CALLS" } ]
} ] }
response_cache { enable: true }
"""

CACHED = "response_cache { enable: true }"

_values = count(1)


def fresh(width: int = 4, rows: int = 1) -> np.ndarray:
    """Input data no other request of this module sends."""
    start = next(_values) * 1000
    return np.arange(start, start + width * rows, dtype=np.float32).reshape(rows, width)


def build_repository(root: Path) -> Path:
    repository = ModelRepositoryBuilder(root)
    repository.add_python_model("counter", COUNTER, COUNTER_CONFIG.format(cache=CACHED))
    repository.add_python_model("uncached", COUNTER, COUNTER_CONFIG.format(cache=""))
    repository.add_python_model("step", COUNTER, COUNTER_CONFIG.format(cache=CACHED))
    repository.add_model("ensemble", ENSEMBLE_CONFIG, {"1/.keep": ""})
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = build_repository(tmp_path_factory.mktemp("cache") / "models")
    process = start_server([root], "--cache-config=local,size=1048576")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(server.http_url)


@pytest.fixture(scope="module")
def grpc(server: ServerProcess) -> grpcclient.InferenceServerClient:
    return grpcclient.InferenceServerClient(server.grpc_url)


def infer(
    client: Any,
    model: str,
    data: np.ndarray,
    *,
    outputs: tuple[str, ...] = (),
    tag: bytes | None = None,
    json_input: bool = False,
    **kwargs: Any,
) -> Any:
    module = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    tensor = module.InferInput("IN", list(data.shape), "FP32")
    if json_input:
        tensor.set_data_from_numpy(data, binary_data=False)
    else:
        tensor.set_data_from_numpy(data)
    inputs = [tensor]
    if tag is not None:
        tagged = module.InferInput("TAG", [data.shape[0], 1], "BYTES")
        tagged.set_data_from_numpy(np.array([[tag]] * data.shape[0], dtype=np.object_))
        inputs.append(tagged)
    requested = [module.InferRequestedOutput(name) for name in outputs] or None
    return client.infer(model, inputs, outputs=requested, **kwargs)


def calls(result: Any) -> int:
    return int(result.as_numpy("CALLS").flat[0])


def stats(server: ServerProcess, model: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=10) as response:
        entry: dict[str, Any] = json.loads(response.read())["model_stats"][0]
    return entry


def counts(server: ServerProcess, model: str) -> dict[str, int]:
    """Hits, misses, successes, executions and inferences of ``model`` so far."""
    entry = stats(server, model)
    inference = entry["inference_stats"]
    return {
        "hit": inference["cache_hit"]["count"],
        "miss": inference["cache_miss"]["count"],
        "success": inference["success"]["count"],
        "executions": entry["execution_count"],
        "inferences": entry["inference_count"],
    }


def settled(server: ServerProcess, model: str, before: dict[str, int], **expected: int) -> dict[str, Any]:
    """Waits until ``model``'s counts moved by ``expected`` since ``before`` (executions are counted
    a moment after the client has its answer); returns the whole statistics entry."""

    def moved() -> bool:
        now = counts(server, model)
        return all(now[key] - before[key] == delta for key, delta in expected.items())

    eventually(moved)
    return stats(server, model)


def metric_samples(server: ServerProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics_text(server))
        for sample in family.samples
    }


def test_a_repeated_request_is_answered_from_the_cache_over_http_and_grpc(
    server: ServerProcess, http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    data = fresh()
    before = counts(server, "counter")
    first = infer(http, "counter", data)
    answers = [infer(http, "counter", data), infer(grpc, "counter", data), infer(grpc, "counter", data)]
    for answer in answers:
        assert calls(answer) == calls(first)  # the model did not run again
        np.testing.assert_array_equal(answer.as_numpy("OUT"), data * 2)
        np.testing.assert_array_equal(answer.as_numpy("EXTRA"), data + 1)
    entry = settled(server, "counter", before, hit=3, miss=1, success=4, executions=1, inferences=1)

    inference = entry["inference_stats"]
    assert inference["cache_hit"]["ns"] > 0
    assert inference["cache_miss"]["ns"] > 0
    assert inference["queue"]["count"] == inference["success"]["count"]  # hits count their queue time
    for phase in ("compute_input", "compute_infer", "compute_output"):  # and no compute
        assert inference[phase]["count"] == inference["success"]["count"] - inference["cache_hit"]["count"]
    assert sum(batch["compute_infer"]["count"] for batch in entry["batch_stats"]) == entry["execution_count"]

    grpc_entry = grpc.get_inference_statistics("counter", as_json=True)["model_stats"][0]["inference_stats"]
    assert int(grpc_entry["cache_hit"]["count"]) == inference["cache_hit"]["count"]
    assert int(grpc_entry["cache_miss"]["count"]) == inference["cache_miss"]["count"]


def test_the_cache_metrics_match_the_statistics(server: ServerProcess, http: httpclient.InferenceServerClient) -> None:
    data = fresh()
    before = counts(server, "counter")
    for _ in range(3):
        infer(http, "counter", data)
    entry = settled(server, "counter", before, hit=2, miss=1)
    inference = entry["inference_stats"]
    samples = metric_samples(server)
    labels = frozenset({"model": "counter", "version": "1"}.items())

    def sample(name: str, key: frozenset[tuple[str, str]] = labels) -> float:
        for candidate in (name, name + "_total"):  # the parser names counter samples <name>_total
            if (candidate, key) in samples:
                return samples[(candidate, key)]
        raise KeyError(name)

    assert sample("nv_cache_num_hits_per_model") == inference["cache_hit"]["count"]
    assert sample("nv_cache_num_misses_per_model") == inference["cache_miss"]["count"]
    assert sample("nv_cache_hit_duration_per_model") == inference["cache_hit"]["ns"] // 1000
    assert sample("nv_cache_miss_duration_per_model") == inference["cache_miss"]["ns"] // 1000
    assert sample("nv_inference_request_success") == inference["success"]["count"]
    assert sample("nv_inference_count") == entry["inference_count"]
    # The server-wide gauges cover every cached model.
    everything = frozenset[tuple[str, str]]()
    assert sample("nv_cache_num_entries", everything) >= 1
    assert sample("nv_cache_num_hits", everything) >= inference["cache_hit"]["count"]
    assert sample("nv_cache_num_lookups", everything) == sample("nv_cache_num_hits", everything) + sample(
        "nv_cache_num_misses", everything
    )
    assert 0 < sample("nv_cache_util", everything) < 1
    # A model whose config does not enable the cache has no cache series.
    assert not any(name.startswith("nv_cache") and ("model", "uncached") in key for name, key in samples)


def test_a_model_without_response_cache_runs_every_request(
    server: ServerProcess, http: httpclient.InferenceServerClient
) -> None:
    data = fresh()
    before = counts(server, "uncached")
    results = [calls(infer(http, "uncached", data)) for _ in range(3)]
    assert results == [results[0], results[0] + 1, results[0] + 2]
    settled(server, "uncached", before, hit=0, miss=0, executions=3)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_what_the_cache_tells_apart(
    protocol: str,
    server: ServerProcess,
    http: httpclient.InferenceServerClient,
    grpc: grpcclient.InferenceServerClient,
) -> None:
    client = http if protocol == "http" else grpc
    data = fresh()
    stored = calls(infer(client, "counter", data))
    # The same request, however it is sent: a hit.
    assert calls(infer(client, "counter", data, request_id="another-id")) == stored
    assert calls(infer(client, "counter", data, priority=0, timeout=10_000_000)) == stored
    if protocol == "http":
        assert calls(infer(http, "counter", data, json_input=True)) == stored
    # Fewer outputs of the same request: a hit with just those.
    only_calls = infer(client, "counter", data, outputs=("CALLS",))
    assert calls(only_calls) == stored
    assert only_calls.as_numpy("OUT") is None
    # A different request: a miss each, even where only the shape or the parameters differ.
    assert calls(infer(client, "counter", data + 1)) > stored
    assert calls(infer(client, "counter", data.reshape(2, 2))) > stored
    assert calls(infer(client, "counter", data, tag=b"a")) > stored
    assert calls(infer(client, "counter", data, parameters={"scale": 2})) > stored


def test_an_entry_gains_the_outputs_a_later_request_asks_for(
    server: ServerProcess, http: httpclient.InferenceServerClient
) -> None:
    data = fresh()
    first = infer(http, "counter", data, outputs=("OUT", "CALLS"))
    assert first.as_numpy("EXTRA") is None
    # EXTRA is not stored: the model runs, and the entry now holds all three.
    second = infer(http, "counter", data, outputs=("EXTRA", "CALLS"))
    assert calls(second) == calls(first) + 1
    np.testing.assert_array_equal(second.as_numpy("EXTRA"), data + 1)
    both = infer(http, "counter", data, outputs=("OUT", "EXTRA"))
    np.testing.assert_array_equal(both.as_numpy("OUT"), data * 2)
    np.testing.assert_array_equal(both.as_numpy("EXTRA"), data + 1)
    assert calls(infer(http, "counter", data)) == calls(second)


def test_a_hit_carries_its_own_request_id(server: ServerProcess, grpc: grpcclient.InferenceServerClient) -> None:
    data = fresh()
    infer(grpc, "counter", data, request_id="first")
    again = infer(grpc, "counter", data, request_id="second")
    assert again.get_response().id == "second"


def test_a_hit_is_shaped_as_its_request_asks(server: ServerProcess, http: httpclient.InferenceServerClient) -> None:
    data = np.array([[3.0, 9.0, 1.0, 5.0]], dtype=np.float32) + fresh(1)
    stored = infer(http, "counter", data, outputs=("OUT", "CALLS"))
    tensor = httpclient.InferInput("IN", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data, binary_data=False)
    as_classes = http.infer(
        "counter",
        [tensor],
        outputs=[
            httpclient.InferRequestedOutput("OUT", class_count=2, binary_data=False),
            httpclient.InferRequestedOutput("CALLS", binary_data=False),
        ],
    )
    assert calls(as_classes) == calls(stored)  # the same entry, classified on the way out
    top = [str(entry) for entry in as_classes.as_numpy("OUT").flat]  # JSON classes arrive as text
    assert [entry.split(":")[1] for entry in top] == ["1", "3"]


def test_errors_are_never_cached(server: ServerProcess, http: httpclient.InferenceServerClient) -> None:
    data = -fresh()
    before = counts(server, "counter")
    for _ in range(2):
        with pytest.raises(InferenceServerException, match="negative input"):
            infer(http, "counter", data)
    settled(server, "counter", before, hit=0, miss=2, executions=2)


def test_a_batch_is_one_entry(server: ServerProcess, grpc: grpcclient.InferenceServerClient) -> None:
    data = fresh(rows=2)
    before = counts(server, "counter")
    stored = infer(grpc, "counter", data)
    again = infer(grpc, "counter", data)
    assert calls(again) == calls(stored)
    np.testing.assert_array_equal(again.as_numpy("OUT"), data * 2)
    settled(server, "counter", before, hit=1, miss=1, inferences=2)
    assert calls(infer(grpc, "counter", data[:1])) > calls(stored)  # one row of it is another request


def test_an_ensemble_and_its_steps_are_cached_each(
    server: ServerProcess, http: httpclient.InferenceServerClient
) -> None:
    data = fresh()
    ensemble_before, step_before = counts(server, "ensemble"), counts(server, "step")
    first = infer(http, "ensemble", data)
    for _ in range(2):
        assert calls(infer(http, "ensemble", data)) == calls(first)
    settled(server, "ensemble", ensemble_before, hit=2, miss=1, success=3)
    settled(server, "step", step_before, hit=0, miss=1, executions=1)
    # The step's entry answers the step called alone with the same data, for the outputs the ensemble took.
    assert calls(infer(http, "step", data, outputs=("OUT", "CALLS"))) == calls(first)
    settled(server, "step", step_before, hit=1, miss=1, executions=1)


def test_the_startup_log_names_the_cached_models(server: ServerProcess) -> None:
    assert "response cache: 1048576 bytes, for 'counter', 'ensemble', 'step'" in server.logs()


def test_the_config_shows_the_cache(server: ServerProcess, http: httpclient.InferenceServerClient) -> None:
    assert http.get_model_config("counter")["response_cache"] == {"enable": True}
    assert "response_cache" not in http.get_model_config("uncached")


def test_without_a_server_cache_a_model_that_enables_it_runs_every_request(tmp_path: Path) -> None:
    repository = ModelRepositoryBuilder(tmp_path)
    repository.add_python_model("counter", COUNTER, COUNTER_CONFIG.format(cache=CACHED))
    process = start_server([tmp_path])
    try:
        client = httpclient.InferenceServerClient(process.http_url)
        data = fresh()
        first, second = calls(infer(client, "counter", data)), calls(infer(client, "counter", data))
        assert second == first + 1
        assert "enables response_cache, but the server keeps no cache" in process.logs()
        assert "--cache-config local,size=BYTES" in process.logs()
        # As in Triton: the model's cache series exist (at 0), the server-wide gauges do not.
        metrics = metrics_text(process)
        assert 'nv_cache_num_hits_per_model{model="counter",version="1"} 0' in metrics
        assert "nv_cache_num_entries" not in metrics
        assert "nv_cache_util" not in metrics
    finally:
        process.stop()


def test_an_ensemble_written_decoupled_may_not_enable_the_cache(tmp_path: Path) -> None:
    """Triton checks the config as written, before its steps (none decoupled here) decide what it is."""
    repository = ModelRepositoryBuilder(tmp_path)
    repository.add_python_model("step", COUNTER, COUNTER_CONFIG.format(cache=""))
    written = ENSEMBLE_CONFIG + "model_transaction_policy { decoupled: true }"
    repository.add_model("ensemble", written, {"1/.keep": ""})
    process = start_server([tmp_path], "--cache-config=local,size=4096")
    try:
        index = httpclient.InferenceServerClient(process.http_url).get_model_repository_index()
        states = {entry["name"]: (entry["state"], entry.get("reason", "")) for entry in index}
        assert states["step"] == ("READY", "")
        assert states["ensemble"] == (
            "UNAVAILABLE",
            "Invalid argument: model 'ensemble': Response Cache does not currently support model ensemble with "
            "'decoupled' transaction policy. Please disable the response cache.",
        )
    finally:
        process.stop()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--cache-config=redis,size=10",), "naiad has no cache named 'redis'"),
        (("--cache-config=local,size=0",), "the size must be a whole number of bytes > 0"),
        (("--cache-config=local,size=abc",), "the size must be a whole number of bytes > 0"),
        (("--cache-config=local,bogus=1",), "unknown setting 'bogus'"),
        (("--cache-config=local",), "is not <cache>,<key>=<value>"),
        (
            ("--cache-config=local,size=10", "--response-cache-byte-size=10"),
            "Incompatible flags --response-cache-byte-size and --cache-config both provided",
        ),
    ],
)
def test_a_cache_config_naiad_cannot_use_stops_it_at_startup(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ServerStartError, match=message):
        start_server([tmp_path], *flags)


def test_summaries_and_counters_follow_the_metrics_config(tmp_path: Path) -> None:
    root = build_repository(tmp_path / "models")
    process = start_server(
        [root],
        "--cache-config=local,size=1048576",
        "--metrics-config=summary_latencies=true",
        "--metrics-config=counter_latencies=false",
    )
    try:
        client = httpclient.InferenceServerClient(process.http_url)
        data = fresh()
        for model in ("counter", "uncached"):
            for _ in range(2):
                infer(client, model, data)
        eventually(lambda: counts(process, "uncached")["executions"] == 2)
        samples = metric_samples(process)
        cached = frozenset({"model": "counter", "version": "1"}.items())
        uncached = frozenset({"model": "uncached", "version": "1"}.items())
        # A model that enables the cache has the cache's summaries instead of the request duration's.
        assert samples[("nv_cache_hit_summary_per_model_count", cached)] == 1
        assert samples[("nv_cache_miss_summary_per_model_count", cached)] == 1
        assert ("nv_inference_request_summary_us_count", cached) not in samples
        assert samples[("nv_inference_request_summary_us_count", uncached)] == 2
        assert samples[("nv_inference_queue_summary_us_count", cached)] == 2  # hits included
        assert samples[("nv_inference_compute_infer_summary_us_count", cached)] == 1
        assert ("nv_cache_hit_summary_per_model_count", uncached) not in samples
        # counter_latencies=false drops the per-model cache counters, not the server's gauges.
        assert not any(name.startswith("nv_cache_num_hits_per_model") for name, _ in samples)
        assert samples[("nv_cache_num_hits", frozenset())] == 1
    finally:
        process.stop()
