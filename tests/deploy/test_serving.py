"""naiad started with each manifest's own arguments answers the probes' paths, serves tritonclient,
and exposes every metric the autoscaling rules and queries read."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

from .manifests import (
    HELM_VALUES,
    ROOT,
    NaiadCommand,
    documents,
    naiad_commands,
    objects_of_kind,
    only,
    pod_containers,
)

IDENTITY = """
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
"""
# start_server chooses these (free ports, loopback, its repository); the manifests' other flags are kept.
REPLACED_FLAGS = {"--model-repository", "--http-port", "--grpc-port", "--metrics-port"}
METRIC = re.compile(r"\b(?:nv|naiad)_[a-z_]+")

MANIFEST_COMMANDS = [command for command in naiad_commands() if "Dockerfile" not in command.where]


@pytest.fixture(params=MANIFEST_COMMANDS, ids=lambda command: command.where)
def manifest_server(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    command: NaiadCommand = request.param
    repository = ModelRepositoryBuilder(tmp_path / "models")
    repository.add_model("identity", IDENTITY, {"1/.keep": ""})
    kept = [arg for arg in command.args if arg.partition("=")[0] not in REPLACED_FLAGS]
    server = start_server([repository.root], *kept)
    yield command, server
    assert server.stop() == 0, server.logs()


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


def _probe_paths(command: NaiadCommand) -> set[str]:
    kind = "ServingRuntime" if "ServingRuntime/" in command.where else "Deployment"
    (container,) = pod_containers(only(kind))
    return {container[probe]["httpGet"]["path"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")}


def _metrics_the_autoscaling_reads() -> set[str]:
    (values,) = (document for path in HELM_VALUES for document in documents(path))
    queries = [rule["seriesQuery"] + rule["metricsQuery"] for rule in values["rules"]["custom"]]
    for service in objects_of_kind("InferenceService"):
        for metric in service["spec"]["predictor"].get("autoScaling", {}).get("metrics", []):
            queries.append(metric["external"]["metric"]["query"])
    return {name for query in queries for name in METRIC.findall(query)}


def test_the_autoscaler_reads_the_metrics_the_adapter_serves() -> None:
    (values,) = (document for path in HELM_VALUES for document in documents(path))
    served = {rule["name"]["as"] for rule in values["rules"]["custom"]}
    asked = {metric["pods"]["metric"]["name"] for metric in only("HorizontalPodAutoscaler")["spec"]["metrics"]}
    assert asked == served
    assert {"nv_inference_pending_request_count", "nv_inference_queue_duration_us"} <= _metrics_the_autoscaling_reads()


def test_naiad_serves_with_the_manifest_arguments(manifest_server: tuple[NaiadCommand, ServerProcess]) -> None:
    command, server = manifest_server
    for path in _probe_paths(command):
        assert _get(f"http://{server.http_url}{path}")[0] == 200, path

    client = httpclient.InferenceServerClient(server.http_url)
    request = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    request.set_data_from_numpy(np.arange(4, dtype=np.float32).reshape(1, 4))
    result = client.infer("identity", [request])
    client.close()
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [[0, 1, 2, 3]])

    status, text = _get(f"http://127.0.0.1:{server.metrics_port}/metrics")
    assert status == 200
    families = {family.name for family in text_string_to_metric_families(text)}
    assert _metrics_the_autoscaling_reads() - families == set()


def test_the_kserve_client_snippet_of_the_docs_works(tmp_path: Path) -> None:
    """docs/deploy.md's tritonclient snippet, against naiad started with the ServingRuntime's arguments."""
    (command,) = [command for command in MANIFEST_COMMANDS if "ServingRuntime/" in command.where]
    shutil.copytree(ROOT / "examples" / "model_repository" / "add_sub", tmp_path / "models" / "add_sub")
    kept = [arg for arg in command.args if arg.partition("=")[0] not in REPLACED_FLAGS]
    server = start_server([tmp_path / "models"], *kept)
    try:
        docs = (ROOT / "docs" / "deploy.md").read_text()
        (snippet,) = [block for block in re.findall(r"```python\n(.*?)```", docs, re.DOTALL) if "9000" in block]
        code = snippet.replace('"localhost:8080"', f'"{server.http_url}"')
        code = code.replace('"localhost:9000"', f'"{server.grpc_url}"')
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "docs/deploy.md", "exec"), {})
        assert printed.getvalue().splitlines() == ["[11. 12. 13. 14.]", "True"]
    finally:
        assert server.stop() == 0, server.logs()
