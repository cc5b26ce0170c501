"""Reading config.pbtxt and JSON model configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from naiad.config import ModelConfig, config_from_json, parse_model_config, read_model_config
from naiad.config.parsing import ConfigParseError
from naiad.errors import ErrorCode, NaiadError
from naiad.protocol.model_config_pb2 import DataType, ModelInstanceGroup

VALID = """\
# a comment
name: "add_sub"
backend: "python"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ -1 ] }
]
output { name: "OUTPUT0" data_type: TYPE_STRING dims: 4 }
output: { name: "OUTPUT1" data_type: TYPE_BOOL dims: [ 1 ] reshape: { shape: [ ] } }
dynamic_batching { }
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
parameters [ { key: "k" value { string_value: "v" } } ]
"""


def _model_dir(tmp_path: Path, text: str | bytes, name: str = "add_sub") -> Path:
    model_dir = tmp_path / name
    model_dir.mkdir()
    path = model_dir / "config.pbtxt"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return model_dir


def _parse_error(tmp_path: Path, text: str | bytes) -> str:
    model_dir = _model_dir(tmp_path, text)
    with pytest.raises(NaiadError) as info:
        read_model_config(model_dir)
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message.startswith("model 'add_sub': ")
    return info.value.message


def test_reads_text_format(tmp_path: Path) -> None:
    config = read_model_config(_model_dir(tmp_path, VALID))
    assert config.name == "add_sub"
    assert config.max_batch_size == 8
    assert [i.name for i in config.input] == ["INPUT0", "INPUT1"]
    assert list(config.input[1].dims) == [-1]
    assert config.output[0].data_type == DataType.TYPE_STRING
    assert config.output[1].HasField("reshape")
    assert not config.output[1].reshape.shape
    assert config.HasField("dynamic_batching")
    assert config.instance_group[0].kind == ModelInstanceGroup.KIND_CPU
    assert config.parameters["EXECUTION_ENV_PATH"].string_value.startswith("$$TRITON_MODEL_DIRECTORY")
    assert config.parameters["k"].string_value == "v"


def test_missing_file_gives_empty_config(tmp_path: Path) -> None:
    assert read_model_config(tmp_path) == ModelConfig()


def test_alternative_config_name(tmp_path: Path) -> None:
    model_dir = _model_dir(tmp_path, 'backend: "python"')
    (model_dir / "configs").mkdir()
    (model_dir / "configs" / "big.pbtxt").write_text("max_batch_size: 64")
    assert read_model_config(model_dir, config_name="big").max_batch_size == 64
    assert read_model_config(model_dir, config_name="absent").backend == "python"


def test_unknown_field(tmp_path: Path) -> None:
    message = _parse_error(tmp_path, 'name: "add_sub"\ninput [\n  {\n    dtype: TYPE_FP32\n  }\n]\n')
    path = tmp_path / "add_sub" / "config.pbtxt"
    expected = "line 4, column 5: no field named 'dtype' in inference.ModelInput; did you mean 'data_type'?"
    assert message == f"model 'add_sub': cannot parse {path}: {expected}"


def test_parse_error_carries_its_place_and_the_names_it_may_mean() -> None:
    with pytest.raises(ConfigParseError) as caught:
        parse_model_config('name: "m"\nmax_batch_sise: 4\n', model_name="m", source="m/config.pbtxt")
    error = caught.value
    assert (error.source, error.line, error.column) == ("m/config.pbtxt", 2, 1)
    assert error.name == "max_batch_sise"
    assert error.suggestions == ("max_batch_size",)
    assert error.reason == "no field named 'max_batch_sise' in inference.ModelConfig; did you mean 'max_batch_size'?"


def test_unknown_enum_value_lists_valid_ones(tmp_path: Path) -> None:
    message = _parse_error(tmp_path, "input { data_type: TYPE_FLOAT32 }")
    assert "line 1, column 20: 'TYPE_FLOAT32' is not a value of inference.DataType" in message
    assert "TYPE_FP32" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_batch_size: abc", "line 1, column 17: couldn't parse integer: abc"),
        ("input {", 'line 1, column 7: expected "}"'),
        ('name: "a"\nname: "b"', "line 2, column 7: field 'name' of inference.ModelConfig is set more"),
        (
            "dynamic_batching {}\nsequence_batching {}",
            "line 2, column 1: 'sequence_batching' and 'dynamic_batching' cannot both be set",
        ),
        ("version_policy { latest { num_versions: -1 } }", "line 1, column 41: value out of range: -1"),
        ("name: add_sub", "line 1, column 7: expected string but found: 'add_sub'"),
    ],
)
def test_syntax_errors(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _parse_error(tmp_path, text)


def test_not_utf8(tmp_path: Path) -> None:
    assert "cannot read" in _parse_error(tmp_path, b'name: "\xff"')


def test_model_name_override_in_message() -> None:
    with pytest.raises(NaiadError, match=r"^model 'x': cannot parse memory: line 1"):
        parse_model_config("bogus: 1", model_name="x", source="memory")


def test_json_enums_any_case_and_string_ints() -> None:
    config = config_from_json(
        '{"name": "m", "input": [{"name": "I", "data_type": "type_fp32", "dims": ["4", -1]}],'
        ' "instance_group": [{"kind": "Kind_Cpu"}], "maxBatchSize": 2,'
        ' "sequence_batching": {"control_input": [{"name": "S",'
        ' "control": [{"kind": "control_sequence_start", "int32_false_true": [0, 1]}]}]},'
        ' "parameters": {"p": {"string_value": "v"}}}'
    )
    assert config.input[0].data_type == DataType.TYPE_FP32
    assert list(config.input[0].dims) == [4, -1]
    assert config.instance_group[0].kind == ModelInstanceGroup.KIND_CPU
    assert config.max_batch_size == 2
    assert config.sequence_batching.control_input[0].control[0].int32_false_true == [0, 1]
    assert config.parameters["p"].string_value == "v"


def test_json_takes_one_value_where_a_list_is_expected_as_triton_does() -> None:
    """Triton's own QA loads ``"instance_group": {...}`` (an object, not a list of one)."""
    config = config_from_json('{"instance_group": {"kind": "KIND_CPU", "count": 2}, "input": {"name": "I", "dims": 4}}')
    assert [(group.kind, group.count) for group in config.instance_group] == [(ModelInstanceGroup.KIND_CPU, 2)]
    assert [(tensor.name, list(tensor.dims)) for tensor in config.input] == [("I", [4])]


def test_json_as_protobufs_parser_takes_it() -> None:
    """Triton's own QA loads ``direct: {...}``: unquoted keys, single quotes and trailing commas pass."""
    config = config_from_json(
        """{"sequence_batching": {"iterative_sequence": true, direct: {"max_queue_delay_microseconds": 10},},
        'backend': 'python', parameters: {'p': {'string_value': "it's 'quoted'"}},}"""
    )
    assert config.sequence_batching.direct.max_queue_delay_microseconds == 10
    assert config.backend == "python"
    assert config.parameters["p"].string_value == "it's 'quoted'"
    assert config_from_json("{'max_batch_size': 1e1, 'name': 'tab\\there'}").name == "tab\there"


def test_json_accepts_dict() -> None:
    assert config_from_json({"name": "m", "backend": "python"}).backend == "python"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"bogus": 1}', "invalid JSON model config: no field named 'bogus' in inference.ModelConfig"),
        ('{"input": [{"bogus": 1}]}', "input[0]: no field named 'bogus' in inference.ModelInput"),
        ('{"input": [{"data_type": "TYPE_FP33"}]}', "input[0].data_type: Invalid enum value TYPE_FP33"),
        ('{"max_batch_size": "x"}', "max_batch_size: invalid literal"),
        ("{", "model config is not valid JSON"),
        ("{name: }", "model config is not valid JSON: Expecting property name enclosed in double quotes"),
        ("[1]", "model config JSON must be an object, got list"),
    ],
)
def test_json_errors(text: str, expected: str) -> None:
    with pytest.raises(NaiadError) as info:
        config_from_json(text)
    assert info.value.code is ErrorCode.INVALID_ARG
    assert expected in info.value.message
