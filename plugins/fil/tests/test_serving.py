"""Tiny real models served through naiad, compared with the training library's own predictions."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess, infer_through_shared_memory

from . import models
from .conftest import PROTOCOLS, ServeRepository, connect, fil_config, fil_shaped, infer

Expected = Callable[[Any], Any]


@dataclass
class Served:
    server: ServerProcess
    expected: dict[str, Expected]


DYNAMIC_BATCHING = """
max_batch_size: 8
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
"""
AUTO_MAX_BATCH_SIZE = 16
TWO_INSTANCES = "instance_group [ { count: 2 kind: KIND_CPU } ]"
BOTH_CLASSES = """
max_batch_size: 16
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


@pytest.fixture(scope="module")
def served(module_server: ServeRepository, training_dir: Path) -> Served:
    xgb = models.xgboost_binary(training_dir)
    xgb_ubj = models.xgboost_binary(training_dir, "xgboost.ubj")
    xgb_reg = models.xgboost_regressor(training_dir, "xgboost.model")
    lgbm = models.lightgbm_multiclass(training_dir)
    rf = models.sklearn_forest_classifier(training_dir)
    rf_reg = models.sklearn_forest_regressor(training_dir)
    assert rf.classes is not None
    assert lgbm.classes is not None

    def binary_class(threshold: float) -> Expected:
        return lambda x: (xgb.scores(x) > threshold).astype(np.float32)

    table: dict[str, tuple[str | None, models.Trained, Expected]] = {
        # name: (config.pbtxt, model, expected output)
        "xgb_class": (fil_config(model_type="xgboost_json", is_classifier="true"), xgb, binary_class(0.5)),
        "xgb_proba_batching": (
            fil_config(header=DYNAMIC_BATCHING, model_type="xgboost_ubj", is_classifier="true", predict_proba="true"),
            xgb_ubj,
            xgb_ubj.scores,
        ),
        "xgb_threshold_two_instances": (
            fil_config(header=TWO_INSTANCES, model_type="xgboost_json", output_class="true", threshold="0.3"),
            xgb,
            binary_class(0.3),
        ),
        "xgb_both_classes": (
            fil_config(header=BOTH_CLASSES, model_type="xgboost_json", is_classifier="true", predict_proba="true"),
            xgb,
            lambda x: np.hstack([1.0 - xgb.scores(x), xgb.scores(x)]),
        ),
        "xgb_regressor_default_type": (fil_config(), xgb_reg, xgb_reg.scores),
        "xgb_gtil": (
            fil_config(model_type="xgboost_json", predict_proba="true", naiad_cpu_engine="treelite"),
            xgb,
            xgb.scores,
        ),
        "lgbm_class": (fil_config(model_type="lightgbm", is_classifier="true"), lgbm, lgbm.classes),
        "lgbm_proba": (
            fil_config(model_type="lightgbm", is_classifier="true", predict_proba="true"),
            lgbm,
            lgbm.scores,
        ),
        "lgbm_gtil": (
            fil_config(model_type="lightgbm", predict_proba="true", naiad_cpu_engine="treelite"),
            lgbm,
            lgbm.scores,
        ),
        "rf_class": (fil_config(model_type="treelite_checkpoint", is_classifier="true"), rf, rf.classes),
        "rf_proba": (
            fil_config(model_type="treelite_checkpoint", is_classifier="true", predict_proba="true"),
            rf,
            rf.scores,
        ),
        "rf_regressor": (fil_config(model_type="treelite_checkpoint", is_classifier="false"), rf_reg, rf_reg.scores),
        # No config.pbtxt: the directory name gives the backend, the file and the config come from the model.
        "xgb_no_config.fil": (None, models.xgboost_binary(training_dir, "xgboost.model"), binary_class(0.5)),
    }

    def fill(repository: ModelRepositoryBuilder) -> None:
        for name, (config, trained, _) in table.items():
            repository.add_model(name, config, {f"1/{trained.filename}": trained.content})

    server = module_server(fill, f"--backend-config=fil,default-max-batch-size={AUTO_MAX_BATCH_SIZE}")
    return Served(server, {name: expected for name, (_, _, expected) in table.items()})


MODELS = [
    "xgb_class",
    "xgb_proba_batching",
    "xgb_threshold_two_instances",
    "xgb_both_classes",
    "xgb_regressor_default_type",
    "xgb_gtil",
    "lgbm_class",
    "lgbm_proba",
    "lgbm_gtil",
    "rf_class",
    "rf_proba",
    "rf_regressor",
    "xgb_no_config.fil",
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", MODELS)
def test_served_output_matches_the_library(served: Served, model: str, protocol: str) -> None:
    expected = fil_shaped(served.expected[model](models.TEST))
    output = infer(served.server, protocol, model, models.TEST)
    assert output.shape == expected.shape
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rows_through_system_shared_memory(served: Served, protocol: str) -> None:
    url = served.server.http_url if protocol == "http" else served.server.grpc_url
    output = infer_through_shared_memory(url, protocol, "lgbm_proba", {"input__0": models.TEST})["output__0"]
    np.testing.assert_allclose(output, served.expected["lgbm_proba"](models.TEST), rtol=1e-5)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_single_row_request(served: Served, protocol: str) -> None:
    row = models.TEST[3:4]
    np.testing.assert_allclose(
        infer(served.server, protocol, "lgbm_proba", row), fil_shaped(served.expected["lgbm_proba"](row)), rtol=1e-5
    )


def test_threshold_changes_the_decision(served: Served) -> None:
    scores = served.expected["xgb_gtil"](models.TEST)
    assert np.any((scores > 0.3) != (scores > 0.5)), "test data must put some scores between the thresholds"


def _tensors(tensors: list[dict[str, Any]]) -> list[tuple[str, str, list[int]]]:
    return [(tensor["name"], tensor["data_type"], [int(dim) for dim in tensor["dims"]]) for tensor in tensors]


def _config(served: Served, model: str) -> dict[str, Any]:
    with connect(served.server, "http") as client:
        return dict(client.get_model_config(model))


@pytest.mark.parametrize(
    ("model", "output_dims"),
    [("xgb_class", [1]), ("lgbm_proba", [3]), ("rf_proba", [2]), ("rf_regressor", [1]), ("xgb_no_config.fil", [1])],
)
def test_auto_complete_fills_tensors_and_batching(served: Served, model: str, output_dims: list[int]) -> None:
    config = _config(served, model)
    assert config["max_batch_size"] == AUTO_MAX_BATCH_SIZE
    assert _tensors(config["input"]) == [("input__0", "TYPE_FP32", [models.N_FEATURES])]
    assert _tensors(config["output"]) == [("output__0", "TYPE_FP32", output_dims)]
    assert config["dynamic_batching"]["preferred_batch_size"] == [AUTO_MAX_BATCH_SIZE]


def test_user_config_is_kept(served: Served) -> None:
    config = _config(served, "xgb_proba_batching")
    assert config["max_batch_size"] == 8
    assert int(config["dynamic_batching"]["max_queue_delay_microseconds"]) == 20000
    assert [group["count"] for group in _config(served, "xgb_threshold_two_instances")["instance_group"]] == [2]


def test_grpc_config_matches_http(served: Served) -> None:
    with connect(served.server, "grpc") as client:
        response = client.get_model_config("lgbm_proba", as_json=True)
    assert _tensors(response["config"]["output"]) == [("output__0", "TYPE_FP32", [3])]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["xgb_proba_batching", "xgb_threshold_two_instances"])
def test_concurrent_requests(served: Served, model: str, protocol: str) -> None:
    """Concurrent one-row requests: dynamically batched, or spread over two instances."""
    rows = [models.TEST[i : i + 1] for i in range(len(models.TEST))] * 2
    with ThreadPoolExecutor(max_workers=8) as pool:
        outputs = list(pool.map(lambda row: infer(served.server, protocol, model, row), rows))
    for row, output in zip(rows, outputs, strict=True):
        np.testing.assert_allclose(output, fil_shaped(served.expected[model](row)), rtol=1e-5, atol=1e-6)


def test_load_log_names_engine_and_deprecation(served: Served) -> None:
    logs = served.server.logs()
    assert "xgboost" in logs
    assert "native predictor on cpu" in logs
    assert "treelite" in logs
    assert "GTIL on cpu" in logs
    assert "parameter 'output_class' is deprecated" in logs
    assert "holds UBJSON, not the legacy binary format" in logs
