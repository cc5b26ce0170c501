"""Device choice: instance kind and TARGET_DEVICE against the devices OpenVINO really sees."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import pytest

from naiad.backend import ErrorCode, NaiadError
from naiad.testing import ModelRepositoryBuilder
from naiad_openvino.devices import choose_device
from naiad_openvino.instance import OpenVinoInstance

from . import models
from .conftest import LoadModel, Sources, batch_of, infer, place

CORE = ov.Core()
OPENVINO_GPUS = [device for device in CORE.available_devices if device.startswith("GPU")]
needs_openvino_gpu = pytest.mark.skipif(
    not OPENVINO_GPUS, reason="needs an OpenVINO GPU device (an Intel GPU with its OpenCL runtime)"
)


@pytest.mark.parametrize("kind", ["CPU", "MODEL"])
def test_cpu_and_model_instances_run_on_cpu(kind: str) -> None:
    assert choose_device(CORE, kind, 0, None, "m", "m_0") == "CPU"


def test_target_device_wins() -> None:
    assert choose_device(CORE, "CPU", 0, "AUTO", "m", "m_0") == "AUTO"


def test_gpu_instance_without_an_openvino_gpu_fails_clearly() -> None:
    if OPENVINO_GPUS:  # this host has one: the instance gets it (checked in detail below)
        assert choose_device(CORE, "GPU", 0, None, "m", "m_0").startswith("GPU")
        return
    with pytest.raises(NaiadError) as raised:
        choose_device(CORE, "GPU", 0, None, "m", "m_0")
    assert raised.value.code == ErrorCode.UNAVAILABLE
    assert "model 'm', instance 'm_0': KIND_GPU needs an OpenVINO GPU device (an Intel GPU)" in raised.value.message
    assert "OpenVINO finds only CPU" in raised.value.message


@needs_openvino_gpu
def test_gpu_instance_uses_the_openvino_gpu() -> None:
    expected = "GPU" if OPENVINO_GPUS == ["GPU"] else "GPU.0"
    assert choose_device(CORE, "GPU", 0, None, "m", "m_0") == expected


@needs_openvino_gpu
def test_target_device_gpu_serves(load_model: LoadModel, tmp_path: Path, sources: Sources) -> None:
    config = 'backend: "openvino"\nparameters { key: "TARGET_DEVICE" value: { string_value: "GPU" } }'
    model = load_model(place(ModelRepositoryBuilder(tmp_path / "models"), "m", config, sources.add_mul_xml))
    instance = model.instances[0]
    assert isinstance(instance, OpenVinoInstance)
    assert instance.device == "GPU"
    inputs = batch_of(3)
    reference = models.reference(sources.add_mul_xml, inputs)
    # GPU inference may run in FP16: compare loosely.
    np.testing.assert_allclose(infer(model, inputs)["OUTPUT1"], reference["OUTPUT1"], rtol=1e-2, atol=1e-2)
