"""Triton's onnxruntime parameters become ONNX Runtime session and run options."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from naiad.backend import ErrorCode, NaiadError, parse_model_config
from naiad_onnxruntime.model import OnnxModel
from naiad_onnxruntime.options import BackendSettings, SessionSettings
from naiad_onnxruntime.tensors import ModelIO

from . import onnx_models
from .conftest import floats, write_model


def _settings(text: str) -> SessionSettings:
    config = parse_model_config(text, model_name="m")
    config.name = "m"
    return SessionSettings.from_config(config)


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (None, ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
        (0, ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
        (-1, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC),
        (1, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED),
        (2, ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
        (7, ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
    ],
)
def test_graph_level_maps_like_triton(level: int | None, expected: Any) -> None:
    text = "" if level is None else f"optimization {{ graph {{ level: {level} }} }}"
    assert _settings(text).session_options(ort).graph_optimization_level == expected


def test_parameters_set_the_session_options(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="naiad.onnxruntime")
    settings = _settings(
        _param("intra_op_thread_count", "3")
        + _param("inter_op_thread_count", "2")
        + _param("execution_mode", "1")
        + _param("enable_mem_arena", "0")
        + _param("enable_mem_pattern", "false")
        + _param("session.use_device_allocator_for_initializers", "1")
        + _param("memory.enable_memory_arena_shrinkage", "cpu:0")
    )
    options = settings.session_options(ort)
    assert options.intra_op_num_threads == 3
    assert options.inter_op_num_threads == 2
    assert options.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert options.enable_cpu_mem_arena is False
    assert options.enable_mem_pattern is False
    assert options.get_session_config_entry("session.use_device_allocator_for_initializers") == "1"
    assert settings.run_options(ort) is not None
    for line in (  # Triton's verbose lines, counted by its L0_onnx_optimization
        "Configuring enable_mem_arena to 0",
        "Configuring enable_mem_pattern to false",
        "Configuring memory.enable_memory_arena_shrinkage to cpu:0",
    ):
        assert line in caplog.text


def test_defaults_leave_onnxruntime_alone() -> None:
    settings = _settings("")
    options = settings.session_options(ort)
    defaults = ort.SessionOptions()
    assert options.intra_op_num_threads == defaults.intra_op_num_threads
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert options.enable_cpu_mem_arena == defaults.enable_cpu_mem_arena
    assert settings.run_options(ort) is None
    assert not settings.share_session


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            _param("execution_mode", "2"),
            "Expected values for execution_mode are 0 (sequential) or 1 (parallel) but got 2",
        ),
        (_param("intra_op_thread_count", "many"), "parameter 'intra_op_thread_count' must be an integer, got 'many'"),
        (_param("enable_mem_arena", "maybe"), "parameter 'enable_mem_arena' must be true or false"),
    ],
)
def test_bad_parameter_values_fail_naming_the_parameter(text: str, expected: str) -> None:
    with pytest.raises(NaiadError) as caught:
        _settings(text)
    assert caught.value.code == ErrorCode.INVALID_ARG
    assert "model 'm'" in caught.value.message
    assert expected in caught.value.message


def test_backend_config() -> None:
    assert BackendSettings.from_backend_config({}) == BackendSettings()
    settings = BackendSettings.from_backend_config({"enable-global-threadpool": "1", "intra_op_thread_count": "2"})
    assert settings == BackendSettings(True, 2, 0)
    with pytest.raises(NaiadError, match="--backend-config=onnxruntime,inter_op_thread_count must be an integer"):
        BackendSettings.from_backend_config({"inter_op_thread_count": "lots"})


def test_a_model_with_every_cpu_setting_serves(repo: Path, load: Any) -> None:
    config = (
        "max_batch_size: 8\noptimization { graph { level: 2 } }\n"
        + _param("intra_op_thread_count", "1")
        + _param("inter_op_thread_count", "1")
        + _param("execution_mode", "1")
        + _param("enable_mem_arena", "1")
        + _param("enable_mem_pattern", "0")
        + _param("memory.enable_memory_arena_shrinkage", "cpu:0")
    )
    write_model(repo, "m", onnx_models.add_sub(), config)
    loaded = load("m")
    a, b = floats(5, 4), floats(5, 4, seed=2)
    for instance in range(len(loaded.instances)):
        np.testing.assert_allclose(
            loaded.infer({"INPUT0": a, "INPUT1": b}, instance=instance).outputs()["OUTPUT0"], a + b
        )


def test_instances_have_their_own_sessions_unless_shared(repo: Path, load: Any) -> None:
    write_model(repo, "own", onnx_models.add_sub(), "instance_group [ { count: 3 kind: KIND_CPU } ]")
    write_model(
        repo,
        "shared",
        onnx_models.add_sub(),
        "instance_group [ { count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_CPU } ]\n"
        + _param("share_session_between_instances", "true"),
    )
    own = {id(instance.session) for instance in load("own").instances}
    assert len(own) == 3
    shared = [id(instance.session) for instance in load("shared").instances]
    assert shared[0] == shared[1] != shared[2]


def test_the_first_cpu_instance_runs_the_session_the_load_opened(
    repo: Path, load: Any, caplog: pytest.LogCaptureFixture
) -> None:
    write_model(repo, "m", onnx_models.add_sub(), "instance_group [ { count: 2 kind: KIND_CPU } ]")
    with caplog.at_level(logging.INFO, logger="naiad.onnxruntime"):
        loaded = load("m")
    reused = [record.getMessage() for record in caplog.records if "the session the load opened" in record.getMessage()]
    assert reused == ["model 'm': instance 'm_0_0' runs the session the load opened, on CPUExecutionProvider"]
    assert len({id(instance.session) for instance in loaded.instances}) == 2


_OPENVINO = 'optimization { execution_accelerators { cpu_execution_accelerator [ { name: "openvino" } ] } }'


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("instance_group [ { count: 1 kind: KIND_CPU } ]", True),
        ("instance_group [ { count: 1 kind: KIND_MODEL } ]", True),
        ("instance_group [ { count: 1 kind: KIND_GPU }, { count: 1 kind: KIND_CPU } ]", True),
        ("instance_group [ { count: 2 kind: KIND_GPU } ]", False),
        ("instance_group [ { count: 0 kind: KIND_CPU }, { count: 1 kind: KIND_GPU } ]", False),
        ("instance_group [ { count: 1 kind: KIND_CPU } ]\n" + _OPENVINO, False),
    ],
)
def test_the_probe_session_is_kept_only_for_a_plain_cpu_instance(text: str, kept: bool) -> None:
    config = parse_model_config(text, model_name="m")
    model = OnnxModel(config, Path("model.onnx"), SessionSettings(), ModelIO((), ()), probe=object())
    model.configured(config)
    assert (model._probe is not None) is kept
