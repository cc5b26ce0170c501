"""The example generator writes a model the backend serves."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from naiad.testing import ModelRepositoryBuilder

from .conftest import LoadModel
from .models import TORCHSCRIPT_DEPRECATION, fp32

pytestmark = TORCHSCRIPT_DEPRECATION

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "make_example.py"


def test_make_example_writes_a_servable_model(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    spec = importlib.util.spec_from_file_location("make_example", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    model_dir = script.write_example(model_repository.root)
    assert (model_dir / "1" / "model.pt").is_file()
    model = load(model_dir.name)
    assert model.config.HasField("dynamic_batching")
    a, b = fp32(2, 4, seed=1), fp32(2, 4, seed=2)
    outputs = model.infer({"INPUT__0": a, "INPUT__1": b})
    np.testing.assert_allclose(outputs["OUTPUT__0"], a + b)
    np.testing.assert_allclose(outputs["OUTPUT__1"], a - b)
