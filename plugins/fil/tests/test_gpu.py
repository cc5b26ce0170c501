"""KIND_GPU instances: XGBoost's CUDA predictor (or nvForest) against the library's CPU prediction.

Needs a CUDA device and a GPU engine: ``pip install 'naiad-fil[gpu-test]'`` (the CUDA build of
xgboost) and, for LightGBM / Treelite models, nvForest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from naiad.backend import gpu_count
from naiad.testing import ModelRepositoryBuilder, ServerProcess

from . import models
from .conftest import PROTOCOLS, fil_config, fil_shaped, infer

pytestmark = pytest.mark.skipif(gpu_count() == 0, reason="needs a CUDA device")

GPU_INSTANCE = "instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0 ] } ]"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_xgboost_on_gpu_matches_the_library(
    model_repository: ModelRepositoryBuilder,
    naiad_server: Callable[..., ServerProcess],
    tmp_path: Path,
    protocol: str,
) -> None:
    xgb = models.xgboost_binary(tmp_path)
    reg = models.xgboost_regressor(tmp_path)
    proba = fil_config(header=GPU_INSTANCE, model_type="xgboost_json", is_classifier="true", predict_proba="true")
    model_repository.add_model("gpu_proba", proba, {"1/xgboost.json": xgb.content})
    classes = fil_config(header=GPU_INSTANCE, model_type="xgboost_json", is_classifier="true", transfer_threshold="2")
    model_repository.add_model("gpu_classes", classes, {"1/xgboost.json": xgb.content})
    regressor = fil_config(header=GPU_INSTANCE, model_type="xgboost_ubj", is_classifier="false")
    model_repository.add_model("gpu_regressor", regressor, {"1/xgboost.ubj": reg.content})
    server = naiad_server(model_repository.root)
    instances = [line for line in server.logs().splitlines() if "model 'gpu_proba' instance" in line]
    assert instances, server.logs()
    assert instances[0].endswith("on cuda:0"), instances
    np.testing.assert_allclose(
        infer(server, protocol, "gpu_proba", models.TEST), fil_shaped(xgb.scores(models.TEST)), rtol=1e-5
    )
    np.testing.assert_allclose(
        infer(server, protocol, "gpu_regressor", models.TEST), fil_shaped(reg.scores(models.TEST)), rtol=1e-5
    )
    expected = fil_shaped((xgb.scores(models.TEST) > 0.5).astype(np.float32))
    np.testing.assert_array_equal(infer(server, protocol, "gpu_classes", models.TEST), expected)
    # Two rows stay under transfer_threshold and run on the CPU engine: same answer.
    np.testing.assert_array_equal(infer(server, protocol, "gpu_classes", models.TEST[:2]), expected[:2])
