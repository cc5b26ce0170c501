"""The metrics endpoint: Triton's families, types and labels (metrics.md), parsed by prometheus_client."""

from __future__ import annotations

import http.client
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families

from naiad.testing import ModelRepositoryBuilder, ServerProcess

from .conftest import ADD_SUB, ADD_SUB_CONFIG, eventually, metrics_text

# metrics.md §3: every per-model family, its type, and its labels besides model and version.
PER_MODEL = {
    "nv_inference_request_success": ("counter", set()),
    "nv_inference_request_failure": ("counter", {"reason"}),
    "nv_inference_count": ("counter", set()),
    "nv_inference_exec_count": ("counter", set()),
    "nv_inference_pending_request_count": ("gauge", set()),
    "nv_inference_request_duration_us": ("counter", set()),
    "nv_inference_queue_duration_us": ("counter", set()),
    "nv_inference_compute_input_duration_us": ("counter", set()),
    "nv_inference_compute_infer_duration_us": ("counter", set()),
    "nv_inference_compute_output_duration_us": ("counter", set()),
    "nv_model_load_duration_secs": ("gauge", set()),
}
SERVER_WIDE = {
    "nv_pinned_memory_pool_total_bytes": "gauge",
    "nv_pinned_memory_pool_used_bytes": "gauge",
    "nv_cpu_utilization": "gauge",
    "nv_cpu_memory_total_bytes": "gauge",
    "nv_cpu_memory_used_bytes": "gauge",
}
SUMMARIES = (
    "nv_inference_request_summary_us",
    "nv_inference_queue_summary_us",
    "nv_inference_compute_input_summary_us",
    "nv_inference_compute_infer_summary_us",
    "nv_inference_compute_output_summary_us",
)


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def test_families_types_and_labels_match_metrics_md(server: ServerProcess) -> None:
    status, content_type, body = _get(f"http://127.0.0.1:{server.metrics_port}/metrics")
    assert status == 200
    assert content_type == "text/plain; charset=utf-8"
    text = body.decode()
    assert not re.search(r"_(total|created)[{ ]", text)  # Triton's names: no suffixes
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for name, (kind, extra) in PER_MODEL.items():
        assert name in families, name
        assert families[name].type == kind, name
        assert f"# TYPE {name} {kind}\n" in text
        for sample in families[name].samples:
            assert set(sample.labels) == {"model", "version"} | extra, (name, sample.labels)
    for name, kind in SERVER_WIDE.items():
        assert families[name].type == kind
        assert [sample.labels for sample in families[name].samples] == [{}]
    pools = ("nv_pinned_memory_pool_total_bytes", "nv_pinned_memory_pool_used_bytes")
    assert [families[name].samples[0].value for name in pools] == [0, 0]  # no pinned pool, as Triton's CPU build
    utilization = families["nv_cpu_utilization"].samples[0].value
    assert 0.0 <= utilization <= 1.0
    assert (
        families["nv_cpu_memory_total_bytes"].samples[0].value
        >= families["nv_cpu_memory_used_bytes"].samples[0].value
        > 0
    )
    for absent in ("nv_inference_first_response_histogram_ms", *SUMMARIES):
        assert absent not in families  # opt-in, as in Triton
    # naiad's additions
    assert families["naiad_inference_queue_depth"].type == "gauge"
    assert families["naiad_inference_batch_size"].type == "histogram"


def test_series_exist_at_zero_from_load(server: ServerProcess) -> None:
    text = metrics_text(server)
    lines = set(text.splitlines())
    for name in PER_MODEL:
        if name == "nv_inference_request_failure":
            for reason in ("BACKEND", "CANCELED", "OTHER", "REJECTED"):
                assert f'{name}{{model="untouched",reason="{reason}",version="1"}} 0' in lines
        elif name != "nv_model_load_duration_secs":
            assert f'{name}{{model="untouched",version="1"}} 0' in lines, name
    load = [line for line in lines if line.startswith('nv_model_load_duration_secs{model="untouched"')]
    assert len(load) == 1
    assert float(load[0].split()[-1]) > 0


@pytest.mark.parametrize("method", ["POST", "HEAD", "PUT", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("path", ["/metrics", "/other"])
def test_only_get_is_answered_whatever_the_path(server: ServerProcess, method: str, path: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.metrics_port, timeout=10)
    connection.request(method, path, body=b"" if method in ("POST", "PUT") else None)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert (response.status, response.getheader("content-type")) == (405, "text/plain")
    assert body == (b"" if method == "HEAD" else b'{"error":"Method Not Allowed"}')


def test_get_of_another_path_is_not_found(server: ServerProcess) -> None:
    base = f"http://127.0.0.1:{server.metrics_port}"
    assert _get(base + "/metrics/")[0] == 200
    assert _get(base + "/other") == (404, "application/json", b'{"error":"Not Found"}')


def _infer(server: ServerProcess, model: str, count: int) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    for _ in range(count):
        inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
        for tensor in inputs:
            tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
        client.infer(model, inputs)


def test_latency_histograms_summaries_and_switches(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_python_model(
        "tagged",
        ADD_SUB,
        ADD_SUB_CONFIG.format(
            max_batch_size=0,
            extra='metric_tags { key: "team" value: "vision" }\n'
            "model_metrics { metric_control [ { "
            'metric_identifier { family: "nv_inference_first_response_histogram_ms" } '
            "histogram_options { buckets: [ 0.5, 10000 ] } } ] }",
        ),
    )
    server = naiad_server(
        model_repository.root,
        args=(
            "--metrics-config=histogram_latencies=true",
            "--metrics-config=summary_latencies=true",
            "--metrics-config=summary_quantiles=0.5:0.05,0.99:0.001",
            "--metrics-config=counter_latencies=false",
            "--allow-cpu-metrics=false",
            "--metrics-interval-ms=100",
        ),
    )
    _infer(server, "tagged", 3)
    labels = {"model": "tagged", "version": "1", "_team": "vision"}

    def summaries_counted() -> bool:
        families = {family.name: family for family in text_string_to_metric_families(metrics_text(server))}
        request = families["nv_inference_request_summary_us"]
        return any(s.name.endswith("_count") and s.value == 3 for s in request.samples)

    eventually(summaries_counted)
    families = {family.name: family for family in text_string_to_metric_families(metrics_text(server))}
    histogram = families["nv_inference_first_response_histogram_ms"]
    assert histogram.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in histogram.samples if s.name.endswith("_bucket")}
    assert buckets == {"0.5": buckets["0.5"], "10000": 3, "+Inf": 3}  # the model's own buckets
    for name in SUMMARIES:
        family = families[name]
        assert family.type == "summary"
        quantiles = sorted(s.labels["quantile"] for s in family.samples if "quantile" in s.labels)
        assert quantiles == ["0.5", "0.99"]
        for sample in family.samples:
            assert {k: v for k, v in sample.labels.items() if k != "quantile"} == labels
    assert families["nv_inference_request_success"].samples[0].labels == labels
    for absent in ("nv_inference_request_duration_us", "nv_inference_queue_duration_us", "nv_cpu_utilization"):
        assert absent not in families


def test_metrics_can_be_turned_off(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_python_model("m", ADD_SUB, ADD_SUB_CONFIG.format(max_batch_size=0, extra=""))
    server = naiad_server(model_repository.root, args=("--allow-metrics=false",))
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", server.metrics_port)) != 0
    _infer(server, "m", 1)  # statistics are still collected
    client = httpclient.InferenceServerClient(server.http_url)
    eventually(lambda: client.get_inference_statistics("m")["model_stats"][0]["inference_count"] == 1)


def test_statistics_can_be_turned_off(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    model_repository.add_python_model("m", ADD_SUB, ADD_SUB_CONFIG.format(max_batch_size=0, extra=""))
    server = naiad_server(model_repository.root, args=("--collect-statistics=false",))
    _infer(server, "m", 1)
    client = httpclient.InferenceServerClient(server.http_url)
    assert "statistics" not in client.get_server_metadata()["extensions"]
    status, _, body = _get(f"http://{server.http_url}/v2/models/stats")
    assert status == 501
    assert b"--collect-statistics=false" in body
    text = metrics_text(server)
    assert "nv_inference_request_success" not in text
    assert "nv_cpu_utilization" in text


def test_the_registry_belongs_to_the_server(tmp_path: Path) -> None:
    import prometheus_client

    from naiad.metrics.exposition import render
    from naiad.server import Server, ServerOptions

    first = Server(ServerOptions(model_repositories=(tmp_path,)))
    second = Server(ServerOptions(model_repositories=(tmp_path,)))
    assert first.metrics_registry is not second.metrics_registry
    assert first.metrics_registry is not prometheus_client.REGISTRY
    assert "nv_cpu_utilization" in render(first.metrics_registry)
    assert "nv_cpu_utilization" not in prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
