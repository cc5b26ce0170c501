"""Custom metrics (``pb_utils.MetricFamily``) of python models, read from a real server's ``/metrics``.

Every test runs twice: with the models in the server process and in worker processes.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.testing import ThreadedServer, serve_in_thread

from .models import METRIC_ERRORS, isolated, metrics_model, write_model


@pytest.fixture(scope="module", params=["thread", "process"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    mode: str = request.param
    repo: Path = tmp_path_factory.mktemp("models")
    write_model(repo, "metrics", isolated(metrics_model("custom"), mode))
    write_model(repo, "reloaded", isolated(metrics_model("reloaded"), mode))
    for name in ("shared_a", "shared_b"):
        write_model(repo, name, isolated(metrics_model("shared"), mode))
    write_model(repo, "errors", isolated(METRIC_ERRORS, mode))
    with serve_in_thread([repo], model_control_mode="explicit", load_models=("metrics", "errors")) as running:
        yield running


def _infer(client: httpclient.InferenceServerClient, model: str, value: float) -> float:
    """One request with VALUE = ``value``; returns COUNT (the model's request counter)."""
    tensor = httpclient.InferInput("VALUE", [1], "FP32")
    tensor.set_data_from_numpy(np.array([value], np.float32))
    return float(client.infer(model, [tensor]).as_numpy("COUNT")[0])


def _scrape(server: ThreadedServer) -> str:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        return str(response.read().decode())


def _series(text: str, prefix: str) -> dict[str, float]:
    """``{'name{labels}': value}`` for the samples whose name starts with ``prefix``."""
    samples = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            series, _, value = line.rpartition(" ")
            samples[series] = float(value)
    return samples


def test_a_models_counter_gauge_and_histogram_are_exported(
    server: ThreadedServer, http: httpclient.InferenceServerClient
) -> None:
    # Two instances, one series per family: they share the server's series, as in Triton.
    assert [_infer(http, "metrics", value) for value in (0.5, 3.0, 7.0)] == [1.0, 2.0, 3.0]
    text = _scrape(server)
    for name, kind, description in (
        ("custom_requests", "counter", "Requests executed"),
        ("custom_last", "gauge", "Last value seen"),
        ("custom_values", "histogram", "Values seen"),
    ):
        assert f"# HELP {name} {description}\n# TYPE {name} {kind}\n" in text
    assert _series(text, "custom_") == {
        'custom_requests{model="metrics"}': 3.0,
        'custom_last{model="metrics"}': 7.0,
        # bounds written as prometheus-cpp writes them: le="1", not le="1.0"
        'custom_values_bucket{model="metrics",le="1"}': 1.0,
        'custom_values_bucket{model="metrics",le="5"}': 2.0,
        'custom_values_bucket{model="metrics",le="10"}': 3.0,
        'custom_values_bucket{model="metrics",le="+Inf"}': 3.0,
        'custom_values_count{model="metrics"}': 3.0,
        'custom_values_sum{model="metrics"}': 10.5,
    }
    # A histogram series as prometheus-cpp writes it: count, sum, then the buckets.
    histogram = [line.split("{")[0] for line in text.splitlines() if line.startswith("custom_values")]
    assert histogram == ["custom_values_count", "custom_values_sum"] + ["custom_values_bucket"] * 4


def test_unloading_removes_the_models_series_then_the_families_nobody_uses(
    server: ThreadedServer, http: httpclient.InferenceServerClient
) -> None:
    http.load_model("shared_a")
    http.load_model("shared_b")
    _infer(http, "shared_a", 2.0)
    series = _series(_scrape(server), "shared_")
    assert series['shared_requests{model="shared_a"}'] == 1.0
    assert series['shared_requests{model="shared_b"}'] == 0.0

    http.unload_model("shared_a")
    series = _series(_scrape(server), "shared_")
    assert 'shared_requests{model="shared_b"}' in series
    assert not [name for name in series if 'model="shared_a"' in name]

    http.unload_model("shared_b")
    assert "shared_" not in _scrape(server)

    http.load_model("shared_a")  # loaded again: fresh series
    try:
        assert _series(_scrape(server), "shared_requests") == {'shared_requests{model="shared_a"}': 0.0}
    finally:
        http.unload_model("shared_a")


def test_a_reload_keeps_the_families_it_shares_with_the_new_instances(
    server: ThreadedServer, http: httpclient.InferenceServerClient
) -> None:
    http.load_model("reloaded")
    try:
        assert _infer(http, "reloaded", 1.0) == 1.0
        http.load_model("reloaded")  # the new instances come up before the old ones go
        assert _infer(http, "reloaded", 1.0) == 2.0
        assert _series(_scrape(server), "reloaded_requests") == {'reloaded_requests{model="reloaded"}': 2.0}
    finally:
        http.unload_model("reloaded")
    assert "reloaded_" not in _scrape(server)


def test_metric_errors_raise_triton_model_exception_with_the_servers_message(
    http: httpclient.InferenceServerClient,
) -> None:
    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], np.int32))
    messages = json.loads(http.infer("errors", [tensor]).as_numpy("MESSAGES")[0])
    assert messages == {
        "bad_name": "metric family name 'bad name' is invalid; names match [a-zA-Z_:][a-zA-Z0-9_:]*",
        "reserved_name": (
            "metric family name 'nv_mine' starts with a prefix reserved for the server's own families "
            "(nv_, naiad_); choose another name"
        ),
        "bad_kind": "MetricFamily(): unknown metric kind 7; use MetricFamily.COUNTER, GAUGE or HISTOGRAM",
        "other_kind": "metric family 'errors_counter' already exists as a counter, not a gauge",
        "bad_label": (
            "metric family 'errors_counter': label 'bad-label'='x' is invalid; label names match "
            "[a-zA-Z_][a-zA-Z0-9_]* and values are strings"
        ),
        "counter_buckets": "metric family 'errors_counter' is a counter and takes no buckets",
        "histogram_without_buckets": "metric family 'errors_histogram' is a histogram and needs buckets",
        # Triton refuses these two as well
        "unsorted_buckets": (
            "metric family 'errors_histogram': bucket boundaries must be strictly sorted, got [5.0, 1.0]"
        ),
        "labels_not_a_dict": "Failed to create metric. Labels must be a dictionary.",
        "negative_increment": "counter 'errors_counter' cannot be incremented by a negative value (-1)",
        "set_counter": "metric 'errors_counter' is a counter; only a gauge can be set",
        "observe_counter": "metric 'errors_counter' is a counter; only a histogram observes values",
        "histogram_value": "metric 'errors_histogram' is a histogram, which has no value()",
    }
