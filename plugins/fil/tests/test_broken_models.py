"""Models that must not load, one per failure class, with the reason naiad reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonclient.utils import InferenceServerException

from naiad.testing import ModelRepositoryBuilder, ServerProcess

from . import models
from .conftest import ServeRepository, connect, fil_config

FOUR_FEATURES = """
max_batch_size: 8
input [ { name: "%s" data_type: %s dims: [ %s ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ %s ] } ]
"""


def _io(input_name: str = "input__0", dtype: str = "TYPE_FP32", dims: str = "4", output_dims: str = "1") -> str:
    return FOUR_FEATURES % (input_name, dtype, dims, output_dims)


# name -> (config.pbtxt, file name in the version folder or None, content kind, reason the log must show)
BROKEN: dict[str, tuple[str, str | None, str, str]] = {
    "missing_file": (
        fil_config(model_type="xgboost_json", is_classifier="true"),
        "model.txt",
        "lightgbm",
        "xgboost.json' not found (model_type 'xgboost_json' expects 'xgboost.json' in the version folder,"
        " which holds 'model.txt')",
    ),
    "corrupt_json": (
        fil_config(model_type="xgboost_json", is_classifier="true"),
        "xgboost.json",
        "garbage",
        "cannot load an XGBoost JSON model",
    ),
    "corrupt_lightgbm": (
        fil_config(model_type="lightgbm", is_classifier="true"),
        "model.txt",
        "garbage",
        "cannot load a LightGBM text model",
    ),
    "corrupt_checkpoint": (
        fil_config(model_type="treelite_checkpoint", is_classifier="true"),
        "checkpoint.tl",
        "garbage",
        "cannot load a Treelite checkpoint",
    ),
    "corrupt_legacy_binary": (
        fil_config(model_type="xgboost", is_classifier="true"),
        "xgboost.model",
        "garbage_binary",
        "cannot load an XGBoost legacy binary model",
    ),
    "wrong_model_type": (
        fil_config(model_type="treelite_checkpoint", is_classifier="true"),
        "checkpoint.tl",
        "xgboost",
        "cannot load a Treelite checkpoint",
    ),
    "input_name_mismatch": (
        fil_config(header=_io(input_name="X"), model_type="xgboost_json", is_classifier="true"),
        "xgboost.json",
        "xgboost",
        "config.pbtxt lists input(s) 'X', but FIL models take exactly one input named 'input__0'",
    ),
    "datatype_mismatch": (
        fil_config(header=_io(dtype="TYPE_FP64"), model_type="xgboost_json", is_classifier="true"),
        "xgboost.json",
        "xgboost",
        "config.pbtxt gives input 'input__0' data_type TYPE_FP64, but FIL models use TYPE_FP32",
    ),
    "input_shape_mismatch": (
        fil_config(header=_io(dims="5"), model_type="xgboost_json", is_classifier="true"),
        "xgboost.json",
        "xgboost",
        "config.pbtxt gives input 'input__0' dims [ 5 ], but the model has 4 features, so with max_batch_size 8"
        " the dims are [ 4 ]",
    ),
    "output_shape_mismatch": (
        fil_config(header=_io(output_dims="3"), model_type="xgboost_json", is_classifier="true", predict_proba="true"),
        "xgboost.json",
        "xgboost",
        "config.pbtxt gives output 'output__0' dims [ 3 ], but the model has a binary classifier's probability",
    ),
    "unknown_model_type": (
        fil_config(model_type="catboost"),
        "xgboost.json",
        "xgboost",
        "FIL parameter 'model_type' has value 'catboost', expected one of 'xgboost', 'xgboost_json'",
    ),
    "bad_threshold": (
        fil_config(model_type="xgboost_json", is_classifier="true", threshold="high"),
        "xgboost.json",
        "xgboost",
        "FIL parameter 'threshold' has value 'high', expected a number",
    ),
    "treeshap_output": (
        fil_config(
            header='output [ { name: "treeshap_output" data_type: TYPE_FP32 dims: [ 5 ] } ]',
            model_type="xgboost_json",
            is_classifier="true",
        ),
        "xgboost.json",
        "xgboost",
        "output 'treeshap_output' (SHAP values) is not supported by naiad yet",
    ),
}


@pytest.fixture(scope="module")
def server(module_server: ServeRepository, training_dir: Path) -> ServerProcess:
    contents = {
        "xgboost": models.xgboost_binary(training_dir).content,
        "lightgbm": models.lightgbm_multiclass(training_dir).content,
        "garbage": b"\x00\x01 this is not a tree model {",
        "garbage_binary": b"\x00\x00\x00\x3f not an XGBoost model",
    }

    def fill(repository: ModelRepositoryBuilder) -> None:
        for name, (config, filename, kind, _) in BROKEN.items():
            repository.add_model(name, config, {f"1/{filename}": contents[kind]} if filename else {"1/.keep": ""})
        repository.add_model("healthy", fil_config(model_type="xgboost_json"), {"1/xgboost.json": contents["xgboost"]})

    return module_server(fill)


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_model_is_unavailable_with_its_reason(server: ServerProcess, name: str) -> None:
    with connect(server, "http") as client, pytest.raises(InferenceServerException) as raised:
        client.get_model_metadata(name)
    assert raised.value.status() == "404"
    assert "has no available versions" in raised.value.message()
    reason = BROKEN[name][3]
    failures = [line for line in server.logs().splitlines() if f"model '{name}'" in line and "failed to load" in line]
    assert failures, server.logs()
    assert reason in failures[0], failures[0]


def test_other_models_still_serve(server: ServerProcess) -> None:
    with connect(server, "http") as client:
        assert client.is_model_ready("healthy")
