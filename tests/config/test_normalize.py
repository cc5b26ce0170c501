"""Backend detection and load-time defaults (model-config.md §8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from naiad.config import ModelConfig, detect_backend, fill_defaults, parse_model_config
from naiad.errors import NaiadError
from naiad.protocol.model_config_pb2 import ModelInstanceGroup

CPU, GPU = ModelInstanceGroup.KIND_CPU, ModelInstanceGroup.KIND_GPU


def _model(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    """A model directory; keys ending in "/" are directories."""
    model_dir = tmp_path / name
    model_dir.mkdir()
    for relative, text in files.items():
        path = model_dir / relative
        if relative.endswith("/"):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return model_dir


def _detect(model_dir: Path, text: str = "") -> tuple[str, str, str]:
    config = parse_model_config(text, model_name=model_dir.name)
    detect_backend(config, model_dir)
    return config.platform, config.backend, config.default_model_filename


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"1/model.py": ""}, ("", "python", "model.py")),
        ({"1/model.onnx": ""}, ("onnxruntime_onnx", "onnxruntime", "model.onnx")),
        ({"1/model.onnx/": ""}, ("onnxruntime_onnx", "onnxruntime", "model.onnx")),
        ({"1/model.plan": ""}, ("tensorrt_plan", "tensorrt", "model.plan")),
        ({"1/model.savedmodel/": ""}, ("tensorflow_savedmodel", "tensorflow", "model.savedmodel")),
        ({"1/model.graphdef": ""}, ("tensorflow_graphdef", "tensorflow", "model.graphdef")),
        ({"1/model.pt": ""}, ("pytorch_libtorch", "pytorch", "model.pt")),
        ({"1/model.pt2": ""}, ("torch_aoti", "pytorch", "model.pt2")),
        ({"1/model.xml": "", "1/model.bin": ""}, ("", "openvino", "model.xml")),
    ],
)
def test_detect_from_files(tmp_path: Path, files: dict[str, str], expected: tuple[str, str, str]) -> None:
    assert _detect(_model(tmp_path, "m", files)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('backend: "python"', ("", "python", "model.py")),
        ('backend: "onnxruntime"', ("onnxruntime_onnx", "onnxruntime", "model.onnx")),
        ('platform: "onnxruntime_onnx"', ("onnxruntime_onnx", "onnxruntime", "model.onnx")),
        ('platform: "tensorrt_plan"', ("tensorrt_plan", "tensorrt", "model.plan")),
        ('platform: "tensorflow_savedmodel"', ("tensorflow_savedmodel", "tensorflow", "model.savedmodel")),
        ('platform: "pytorch_libtorch"', ("pytorch_libtorch", "pytorch", "model.pt")),
        ('backend: "pytorch"', ("pytorch_libtorch", "pytorch", "model.pt")),
        ('backend: "pytorch" default_model_filename: "model.pt2"', ("torch_aoti", "pytorch", "model.pt2")),
        ('default_model_filename: "model.plan"', ("tensorrt_plan", "tensorrt", "model.plan")),
        ('backend: "python" default_model_filename: "main.py"', ("", "python", "main.py")),
        ('backend: "python" platform: "foo"', ("foo", "python", "model.py")),
        ('backend: "fil"', ("", "fil", "")),
        ('backend: "vllm"', ("", "vllm", "")),
        ('platform: "ensemble"', ("ensemble", "", "")),
    ],
)
def test_detect_from_config(tmp_path: Path, text: str, expected: tuple[str, str, str]) -> None:
    # The explicit fields win over the model.py on disk.
    assert _detect(_model(tmp_path, "m", {"1/model.py": ""}), text) == expected


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ('platform: "python"', "'python' is a backend: set backend: \"python\" in config.pbtxt"),
        ('platform: "foo_bar"', "set 'backend' in config.pbtxt, or a platform: ensemble, libtorch, onnxruntime_onnx"),
    ],
)
def test_a_platform_no_backend_serves_is_named_as_triton_names_it(tmp_path: Path, text: str, hint: str) -> None:
    platform = text.split('"')[1]
    with pytest.raises(NaiadError) as raised:
        _detect(_model(tmp_path, "m", {"1/model.py": ""}), text)
    assert raised.value.message.startswith(f"unexpected platform type '{platform}' for m; {hint}")


def test_custom_backend_from_directory_name(tmp_path: Path) -> None:
    assert _detect(_model(tmp_path, "my.identity", {"1/": ""})) == ("", "identity", "model.identity")


def test_only_first_subdirectory_is_inspected(tmp_path: Path) -> None:
    model_dir = _model(tmp_path, "m", {"1/": "", "2/model.py": ""})
    with pytest.raises(NaiadError, match="model 'm': cannot determine the backend: set 'backend'"):
        _detect(model_dir)


def test_name_from_directory(tmp_path: Path) -> None:
    model_dir = _model(tmp_path, "add_sub", {"1/model.py": ""})
    config = ModelConfig()
    detect_backend(config, model_dir)
    assert config.name == "add_sub"
    config = ModelConfig(name="kept", backend="python")
    detect_backend(config, model_dir)
    assert config.name == "kept"


def _filled(text: str, gpu_count: int = 0) -> ModelConfig:
    config = parse_model_config(text, model_name="m")
    config.name = config.name or "m"
    fill_defaults(config, gpu_count=gpu_count)
    return config


def test_defaults_of_a_plain_model() -> None:
    config = _filled('backend: "python"')
    assert config.version_policy.latest.num_versions == 1
    assert config.optimization.input_pinned_memory.enable
    assert config.optimization.output_pinned_memory.enable
    assert len(config.instance_group) == 1
    group = config.instance_group[0]
    assert (group.name, group.kind, group.count, list(group.gpus)) == ("m", CPU, 1, [])
    assert not config.HasField("dynamic_batching")
    assert not config.HasField("model_transaction_policy")


def test_existing_values_are_kept() -> None:
    config = _filled(
        'backend: "python" version_policy { all {} } optimization { input_pinned_memory { enable: false } }'
    )
    assert config.version_policy.WhichOneof("policy_choice") == "all"
    assert not config.optimization.input_pinned_memory.enable
    assert config.optimization.output_pinned_memory.enable


def test_batcher_defaults() -> None:
    config = _filled("max_batch_size: 8 dynamic_batching {}")
    assert list(config.dynamic_batching.preferred_batch_size) == [8]
    config = _filled("max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 2, 4 ] }")
    assert list(config.dynamic_batching.preferred_batch_size) == [2, 4]
    config = _filled("max_batch_size: 0 dynamic_batching {}")
    assert list(config.dynamic_batching.preferred_batch_size) == []
    config = _filled("max_batch_size: 4 sequence_batching { oldest { max_candidate_sequences: 2 } }")
    assert list(config.sequence_batching.oldest.preferred_batch_size) == [4]
    assert config.sequence_batching.max_sequence_idle_microseconds == 1_000_000
    config = _filled("sequence_batching { max_sequence_idle_microseconds: 5 }")
    assert config.sequence_batching.max_sequence_idle_microseconds == 5
    assert not config.sequence_batching.HasField("oldest")


def test_ensemble_defaults() -> None:
    config = _filled('platform: "ensemble" ensemble_scheduling { step { model_name: "a" } }')
    assert config.version_policy.latest.num_versions == 1
    assert not config.HasField("optimization")
    assert not config.instance_group
    assert config.HasField("model_transaction_policy")
    assert not config.model_transaction_policy.decoupled


def test_instance_groups_on_gpus() -> None:
    config = _filled('backend: "python"', gpu_count=2)
    group = config.instance_group[0]
    assert (group.name, group.kind, group.count, list(group.gpus)) == ("m", GPU, 1, [0, 1])


def test_instance_group_names_kinds_and_counts() -> None:
    config = _filled(
        'backend: "onnxruntime" instance_group [ { kind: KIND_CPU }, { name: "g" count: 3 },'
        " { gpus: [ 5 ] }, { kind: KIND_GPU gpus: [ 1 ] }, { kind: KIND_MODEL } ]",
        gpu_count=2,
    )
    summary = [(g.name, g.kind, g.count, list(g.gpus)) for g in config.instance_group]
    assert summary == [
        ("m_0", CPU, 2, []),  # onnxruntime on CPU: 2 instances
        ("g", GPU, 3, [0, 1]),
        ("m_2", CPU, 2, [5]),  # GPU 5 does not exist: KIND_AUTO falls back to CPU (validation rejects gpus)
        ("m_3", GPU, 1, [1]),
        ("m_4", ModelInstanceGroup.KIND_MODEL, 1, []),
    ]


def test_auto_kind_without_gpus_is_cpu() -> None:
    config = _filled('backend: "python" instance_group [ { count: 2 } ]')
    assert [(g.name, g.kind, g.count) for g in config.instance_group] == [("m_0", CPU, 2)]
