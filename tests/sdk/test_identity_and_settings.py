"""The built-in identity backend, loaded in-process with naiad.testing.load_model, and backend settings."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from naiad.backend import ErrorCode, NaiadError
from naiad.cli import build_parser
from naiad.plugins import BackendSettings
from naiad.testing import ModelRepositoryBuilder, load_model

from .backends import IDENTITY_CONFIG


def test_identity_returns_each_input_as_its_paired_output(tmp_path: Path) -> None:
    config = """
        backend: "identity"
        max_batch_size: 4
        input [ { name: "A" data_type: TYPE_INT32 dims: [ 2 ] },
                { name: "B" data_type: TYPE_STRING dims: [ 1 ] } ]
        output [ { name: "A_OUT" data_type: TYPE_INT32 dims: [ 2 ] },
                 { name: "B_OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
    """
    model_dir = ModelRepositoryBuilder(tmp_path).add_model("pair", config, {"1/.keep": ""})
    with load_model(model_dir) as model:
        a = np.array([[1, 2], [3, 4]], dtype=np.int32)
        b = np.array([[b"x"], [b"yz"]], dtype=np.object_)
        response = model.infer({"A": a, "B": b})
        assert response.error is None
        outputs = {tensor.name: tensor.numpy() for tensor in response.outputs}
        np.testing.assert_array_equal(outputs["A_OUT"], a)
        assert outputs["B_OUT"].tolist() == [[b"x"], [b"yz"]]
        assert model.config.instance_group[0].count == 1


def test_inputs_and_outputs_pair_up_by_the_shape_the_backend_sees(tmp_path: Path) -> None:
    """Triton's nop_tunnel QA models: input dims [1, 2] reshaped to [2], output dims [2]."""
    config = """
        backend: "identity"
        max_batch_size: 4
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1, 2 ] reshape: { shape: [ 2 ] } } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
    """
    model_dir = ModelRepositoryBuilder(tmp_path).add_model("tunnel", config, {"1/.keep": ""})
    with load_model(model_dir) as model:
        data = np.array([[[1, 2]], [[3, 4]]], dtype=np.float32)
        response = model.infer({"INPUT0": data})
        assert response.error is None
        np.testing.assert_array_equal(response.outputs[0].numpy(), data.reshape(2, 2))


def test_the_delay_parameter_slows_every_execution(tmp_path: Path) -> None:
    delay = 'parameters { key: "execute_delay_ms" value: { string_value: "50" } }'
    model_dir = ModelRepositoryBuilder(tmp_path).add_model("slow", IDENTITY_CONFIG.format(extra=delay), {"1/.keep": ""})
    with load_model(model_dir) as model:
        started = time.monotonic()
        assert model.infer({"INPUT0": np.ones((1, 3), dtype=np.float32)}).error is None
        assert time.monotonic() - started >= 0.05


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            IDENTITY_CONFIG.format(extra="").replace(
                'output [ { name: "OUTPUT0" data_type: TYPE_FP32', 'output [ { name: "OUTPUT0" data_type: TYPE_INT32'
            ),
            "identity model 'bad': output 'OUTPUT0' must have the datatype and dims of input 'INPUT0'",
        ),
        (
            IDENTITY_CONFIG.format(extra='parameters { key: "execute_delay_ms" value: { string_value: "soon" } }'),
            "identity model 'bad': parameter execute_delay_ms is 'soon'; give a number of milliseconds >= 0",
        ),
    ],
)
def test_identity_configs_that_cannot_work_fail_to_load(tmp_path: Path, config: str, message: str) -> None:
    model_dir = ModelRepositoryBuilder(tmp_path).add_model("bad", config, {"1/.keep": ""})
    with pytest.raises(NaiadError) as caught:
        load_model(model_dir)
    assert (caught.value.code, caught.value.message) == (ErrorCode.INVALID_ARG, message)


def test_backend_settings_layer_a_backends_own_over_the_global_ones() -> None:
    settings = BackendSettings({"": {"default-max-batch-size": "8", "shared": "g"}, "onnxruntime": {"shared": "o"}})
    assert settings.for_backend("onnxruntime") == {"default-max-batch-size": "8", "shared": "o"}
    assert settings.default_max_batch_size("onnxruntime") == 8
    assert BackendSettings({"openvino": {"default-max-batch-size": "2"}}).default_max_batch_size("openvino") == 2
    assert BackendSettings().default_max_batch_size("python") == 4


def test_the_command_line_takes_global_and_backend_settings(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--model-repository=/m",
            "--backend-config=default-max-batch-size=16",
            "--backend-config=python,shm-region-prefix-name=a,b",
        ]
    )
    assert args.backend_config == [("", "default-max-batch-size", "16"), ("python", "shm-region-prefix-name", "a,b")]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--model-repository=/m", "--backend-config=default-max-batch-size=big"])
    assert "default-max-batch-size must be an integer, got 'big'" in capsys.readouterr().err
