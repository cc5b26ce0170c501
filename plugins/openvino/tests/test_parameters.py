"""Triton's openvino parameters: parsing, errors, and what reaches the compiled model."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from naiad.backend import ErrorCode, ModelConfig, NaiadError
from naiad.testing import ModelRepositoryBuilder
from naiad_openvino.instance import OpenVinoInstance
from naiad_openvino.parameters import OpenVinoOptions, parse_parameters

from .conftest import LoadModel, Sources, batch_of, infer, place


def _config(**parameters: str) -> ModelConfig:
    config = ModelConfig(name="m")
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def test_no_parameters() -> None:
    assert parse_parameters(_config()) == OpenVinoOptions()


def test_values_are_case_insensitive_and_mapped_to_openvino_properties() -> None:
    options = parse_parameters(
        _config(
            PERFORMANCE_HINT="throughput",
            NUM_STREAMS="auto",
            INFERENCE_NUM_THREADS="3",
            COMPILATION_NUM_THREADS="2",
            HINT_BF16="yes",
            SKIP_OV_DYNAMIC_BATCHSIZE="Yes",
            ENABLE_BATCH_PADDING="YES",
            RESHAPE_IO_LAYERS="yes",
            CPU_EXTENSION_PATH="/opt/Ext.so",
            TARGET_DEVICE="gpu.1",
        )
    )
    assert options.compile_properties == {
        "PERFORMANCE_HINT": "THROUGHPUT",
        "NUM_STREAMS": "AUTO",
        "INFERENCE_NUM_THREADS": "3",
        "INFERENCE_PRECISION_HINT": "bf16",
        "COMPILATION_NUM_THREADS": "2",
    }
    assert options.skip_dynamic_batch
    assert options.batch_padding
    assert options.reshape_io_layers
    assert options.cpu_extension_path == "/opt/Ext.so"
    assert options.target_device == "GPU.1"


@pytest.mark.parametrize("value", ["2", "NUMA", "numa"])
def test_num_streams(value: str) -> None:
    assert parse_parameters(_config(NUM_STREAMS=value)).compile_properties["NUM_STREAMS"] == value.upper()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("INFERENCE_NUM_THREADS", "-1", "expected the parameter 'INFERENCE_NUM_THREADS' to be a non-negative number"),
        ("COMPILATION_NUM_THREADS", "x", "expected the parameter 'COMPILATION_NUM_THREADS' to be a non-negative"),
        ("NUM_STREAMS", "1.5", "to be either AUTO/NUMA/<int_value>, got 1.5"),
        ("PERFORMANCE_HINT", "fast", "to be LATENCY/THROUGHPUT/CUMULATIVE_THROUGHPUT, got fast"),
        ("HINT_BF16", "no", "expected the parameter 'HINT_BF16' to be YES, got no"),
    ],
)
def test_bad_values_are_rejected(key: str, value: str, message: str) -> None:
    with pytest.raises(NaiadError) as raised:
        parse_parameters(_config(**{key: value}))
    assert raised.value.code == ErrorCode.INVALID_ARG
    assert raised.value.message.startswith("model 'm': ")
    assert message in raised.value.message


def test_switches_are_on_only_for_yes(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="naiad.openvino"):
        options = parse_parameters(_config(ENABLE_BATCH_PADDING="true", RESHAPE_IO_LAYERS="no"))
    assert not options.batch_padding
    assert not options.reshape_io_layers
    assert "parameter ENABLE_BATCH_PADDING is 'true'; only YES turns it on" in caplog.text
    assert "RESHAPE_IO_LAYERS" not in caplog.text


def test_legacy_parameters_are_ignored_with_a_hint(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="naiad.openvino"):
        options = parse_parameters(_config(CPU_THROUGHPUT_STREAMS="2", CPU_THREADS_NUM="4"))
    assert options.compile_properties == {}
    assert "CPU_THROUGHPUT_STREAMS is no longer supported and is ignored; use NUM_STREAMS" in caplog.text
    assert "CPU_THREADS_NUM is no longer supported and is ignored; use INFERENCE_NUM_THREADS" in caplog.text


@pytest.mark.parametrize(
    "parameters",
    [
        {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": "2"},
        {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": "1"},
    ],
)
def test_properties_reach_the_compiled_model(
    load_model: LoadModel, tmp_path: Path, sources: Sources, parameters: dict[str, str]
) -> None:
    text = "".join(_param(key, value) for key, value in parameters.items())
    repository = ModelRepositoryBuilder(tmp_path / "models")
    model = load_model(place(repository, "m", 'backend: "openvino"\n' + text, sources.add_mul_xml))
    instance = model.instances[0]
    assert isinstance(instance, OpenVinoInstance)
    for key, value in parameters.items():
        assert str(instance.compiled.get_property(key)) == value
    assert infer(model, batch_of(2))["OUTPUT0"].shape == (2, 4)


def test_unsupported_properties_are_dropped_with_a_warning(
    load_model: LoadModel, tmp_path: Path, sources: Sources, caplog: pytest.LogCaptureFixture
) -> None:
    """The CPU plugin has no COMPILATION_NUM_THREADS: the model still loads."""
    config = 'backend: "openvino"\n' + _param("COMPILATION_NUM_THREADS", "1")
    with caplog.at_level(logging.WARNING, logger="naiad.openvino"):
        model = load_model(place(ModelRepositoryBuilder(tmp_path / "models"), "m", config, sources.add_mul_xml))
    assert "model 'm': OpenVINO device CPU does not support COMPILATION_NUM_THREADS; that parameter is ignored" in (
        caplog.text
    )
    assert infer(model, batch_of(1))["OUTPUT0"].shape == (1, 4)
