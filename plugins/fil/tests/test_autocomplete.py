"""Config completion with naiad's defaults, a non-batching config, and auto-complete switched off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess

from . import models
from .conftest import PROTOCOLS, connect, fil_config, fil_shaped, infer

NON_BATCHING = """
max_batch_size: 0
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]
"""
FULL = """
max_batch_size: 8
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def _config(server: ServerProcess, model: str) -> dict[str, Any]:
    with connect(server, "http") as client:
        return dict(client.get_model_config(model))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_default_max_batch_size_and_non_batching_config(
    model_repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
    tmp_path: Path,
    protocol: str,
) -> None:
    xgb = models.xgboost_binary(tmp_path)
    lgbm = models.lightgbm_multiclass(tmp_path)
    model_repository.add_model("minimal", fil_config(model_type="xgboost_json"), {"1/xgboost.json": xgb.content})
    model_repository.add_model(
        "no_batching",
        fil_config(header=NON_BATCHING, model_type="lightgbm", is_classifier="true", predict_proba="true"),
        {"1/model.txt": lgbm.content},
    )
    model_repository.add_model(
        "batch_size_only",
        fil_config(header="max_batch_size: 32", model_type="xgboost_json", is_classifier="false"),
        {"1/xgboost.json": xgb.content},
    )
    server = naiad_server(model_repository.root)

    minimal = _config(server, "minimal")
    assert minimal["max_batch_size"] == 4  # Triton's default-max-batch-size
    assert "dynamic_batching" in minimal
    rows = models.TEST[:4]
    expected = fil_shaped((xgb.scores(rows) > 0.5).astype(np.float32))
    np.testing.assert_array_equal(infer(server, protocol, "minimal", rows), expected)

    np.testing.assert_allclose(
        infer(server, protocol, "no_batching", models.TEST), fil_shaped(lgbm.scores(models.TEST)), rtol=1e-5
    )

    sized = _config(server, "batch_size_only")
    assert sized["max_batch_size"] == 32
    assert [int(dim) for dim in sized["input"][0]["dims"]] == [models.N_FEATURES]
    assert "dynamic_batching" not in sized  # the user chose the batch size, and no scheduler
    # is_classifier "false" on a classifier objective: FIL returns the raw scores.
    np.testing.assert_allclose(
        infer(server, protocol, "batch_size_only", models.TEST), fil_shaped(xgb.scores(models.TEST)), rtol=1e-5
    )


def test_auto_complete_disabled(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    xgb = models.xgboost_binary(tmp_path)
    config = fil_config(header=FULL, model_type="xgboost_json", is_classifier="true")
    model_repository.add_model("full", config, {"1/xgboost.json": xgb.content})
    model_repository.add_model("minimal", fil_config(model_type="xgboost_json"), {"1/xgboost.json": xgb.content})
    server = naiad_server(model_repository.root, args=("--disable-auto-complete-config",))
    np.testing.assert_array_equal(
        infer(server, "http", "full", models.TEST), fil_shaped((xgb.scores(models.TEST) > 0.5).astype(np.float32))
    )
    with connect(server, "http") as client:
        assert not client.is_model_ready("minimal")
    assert (
        "config.pbtxt has no input and auto-complete is disabled;"
        ' add input [ { name: "input__0" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]'
    ) in server.logs()
