"""Execution providers per instance kind and accelerator, and the errors when one is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from naiad.backend import ErrorCode, NaiadError, parse_model_config
from naiad_onnxruntime import providers
from naiad_onnxruntime.providers import CPU, CUDA, OPENVINO, TENSORRT, Provider

from . import onnx_models
from .conftest import floats, write_model

TENSORRT_CONFIG = """
optimization { execution_accelerators {
  gpu_execution_accelerator [ {
    name: "tensorrt"
    parameters { key: "precision_mode" value: "FP16" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" }
    parameters { key: "trt_engine_cache_enable" value: "1" }
  } ]
  cpu_execution_accelerator [ { name: "openvino" } ]
} }
"""


def _plan(text: str, kind: str, device_id: int = 0, cuda: dict[str, str] | None = None) -> list[Provider]:
    config = parse_model_config(text, model_name="m")
    config.name = "m"
    return providers.plan(config, kind, device_id, cuda or {})


def test_cpu_instances_run_on_the_cpu_provider() -> None:
    assert [p.name for p in _plan("", "CPU")] == [CPU]
    assert [p.name for p in _plan("", "MODEL")] == [CPU]


def test_gpu_instances_use_cuda_on_their_device() -> None:
    plan = _plan("", "GPU", device_id=1)
    assert [p.name for p in plan] == [CUDA, CPU]
    assert plan[0].options == {"device_id": "1"}


def test_accelerators_come_first_in_tritons_order() -> None:
    plan = _plan(TENSORRT_CONFIG, "GPU", device_id=2)
    assert [p.name for p in plan] == [TENSORRT, CUDA, OPENVINO, CPU]
    assert plan[0].options == {
        "trt_fp16_enable": "1",
        "trt_max_workspace_size": "1073741824",
        "trt_engine_cache_enable": "1",
        "device_id": "2",
    }
    assert plan[2].options == {"device_type": "CPU"}
    # A CPU instance ignores the GPU accelerators, as Triton does.
    assert [p.name for p in _plan(TENSORRT_CONFIG, "CPU")] == [OPENVINO, CPU]


def test_cuda_accelerator_and_deprecated_parameters_set_cuda_options() -> None:
    text = """
    optimization { execution_accelerators { gpu_execution_accelerator [ {
      name: "cuda" parameters { key: "cudnn_conv_use_max_workspace" value: "0" }
    } ] } }
    """
    plan = _plan(text, "GPU", cuda={"cudnn_conv_algo_search": "1", "gpu_mem_limit": "1000"})
    assert plan[0].name == CUDA
    assert plan[0].options == {
        "cudnn_conv_algo_search": "HEURISTIC",
        "gpu_mem_limit": "1000",
        "cudnn_conv_use_max_workspace": "0",
        "device_id": "0",
    }


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        (
            'optimization { execution_accelerators { cpu_execution_accelerator [ { name: "fast" } ] } }',
            "CPU",
            "unknown Execution Accelerator 'fast' is requested",
        ),
        (
            'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "gpu_io" } ] } }',
            "GPU",
            "unknown Execution Accelerator 'gpu_io' is requested",
        ),
        (
            'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt"'
            ' parameters { key: "precision_mode" value: "FP8" } } ] } }',
            "GPU",
            "unsupported precision mode 'FP8' is requested",
        ),
        (
            'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt"'
            ' parameters { key: "turbo" value: "1" } } ] } }',
            "GPU",
            "unknown parameter 'turbo' is provided for TensorRT Execution Accelerator",
        ),
    ],
)
def test_bad_accelerators_fail(text: str, kind: str, expected: str) -> None:
    with pytest.raises(NaiadError) as caught:
        _plan(text, kind)
    assert caught.value.code == ErrorCode.INVALID_ARG
    assert expected in caught.value.message


def test_a_missing_provider_names_the_provider_setting_and_package() -> None:
    plan = _plan(TENSORRT_CONFIG, "GPU")
    with pytest.raises(NaiadError) as caught:
        providers.check_available(plan, [CPU], "m", "m_0")
    message = caught.value.message
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert "model 'm' instance 'm_0'" in message
    assert "gpu_execution_accelerator 'tensorrt' needs ONNX Runtime's TensorrtExecutionProvider" in message
    assert "pip install 'naiad-onnxruntime[gpu]' tensorrt" in message


def test_a_silently_dropped_provider_fails() -> None:
    with pytest.raises(NaiadError, match="ONNX Runtime could not enable CUDAExecutionProvider"):
        providers.check_enabled(_plan("", "GPU"), [CPU], "m", "m_0")


def test_openvino_without_its_wheel_fails_the_load(repo: Path, load: Any) -> None:
    config = 'optimization { execution_accelerators { cpu_execution_accelerator [ { name: "openvino" } ] } }'
    write_model(repo, "m", onnx_models.add_sub(), config)
    if OPENVINO in ort.get_available_providers():  # this onnxruntime has the EP: the model loads
        a, b = floats(2, 4), floats(2, 4, seed=1)
        np.testing.assert_allclose(load("m").infer({"INPUT0": a, "INPUT1": b}).outputs()["OUTPUT0"], a + b)
        return
    with pytest.raises(NaiadError) as caught:
        load("m")
    assert "cpu_execution_accelerator 'openvino' needs ONNX Runtime's OpenVINOExecutionProvider" in caught.value.message
    assert "pip install onnxruntime-openvino" in caught.value.message


def test_gpu_accelerators_are_ignored_by_cpu_instances(repo: Path, load: Any) -> None:
    config = (
        "instance_group [ { kind: KIND_CPU } ]\n"
        'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }'
    )
    write_model(repo, "m", onnx_models.add_sub(), config)
    a, b = floats(2, 4), floats(2, 4, seed=1)
    np.testing.assert_allclose(load("m").infer({"INPUT0": a, "INPUT1": b}).outputs()["OUTPUT1"], a - b)
