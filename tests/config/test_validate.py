"""Validation rules (model-config.md §9); most cases were also loaded into Triton 2.51."""

from __future__ import annotations

import pytest

from naiad.config import ModelConfig, fill_defaults, parse_model_config, validate_config
from naiad.config.validate import ConfigInvalid
from naiad.errors import ErrorCode, NaiadError

IO = """
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
PY = 'backend: "python" '
SEQ = 'backend: "python" max_batch_size: 2' + IO
DYN = 'backend: "python" max_batch_size: 4' + IO + "dynamic_batching "


def _config(text: str, gpu_count: int = 0) -> ModelConfig:
    config = parse_model_config(text, model_name="m")
    config.name = config.name or "m"
    fill_defaults(config, gpu_count=gpu_count)
    return config


def _error(text: str, gpu_count: int = 0) -> str:
    with pytest.raises(NaiadError) as info:
        validate_config(_config(text, gpu_count), gpu_count=gpu_count)
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message.startswith("model 'm'")
    return info.value.message


@pytest.mark.parametrize(
    "text",
    [
        'backend: "python"' + IO,
        'backend: "python" platform: "foo"' + IO,  # Triton accepts any platform for python
        'backend: "python" max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 2, 8 ] }' + IO,
        'backend: "python" max_batch_size: 2'
        ' input [ { name: "S" data_type: TYPE_STRING dims: [ 1 ] reshape { shape: [ ] } } ]'
        ' output [ { name: "O" data_type: TYPE_FP32 dims: [ -1, 2, 3 ] reshape { shape: [ -1, 6 ] } } ]',
        'backend: "onnxruntime" platform: "onnxruntime_onnx"' + IO,
        'backend: "tensorrt" input [ { name: "I" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]',
        SEQ + "sequence_batching { control_input ["
        ' { name: "S" control [ { kind: CONTROL_SEQUENCE_START bool_false_true: [ false, true ] } ] },'
        ' { name: "R" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] },'
        ' { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] } ] }',
        # A state without dims is a scalar state, as Triton 2.51 takes it.
        SEQ + 'sequence_batching { state [ { input_name: "IS" output_name: "OS" data_type: TYPE_FP32 } ] }',
        # Triton 2.51 accepts several controls in one control input.
        SEQ + 'sequence_batching { control_input [ { name: "S" control ['
        " { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] },"
        " { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] } ] }",
        'platform: "ensemble" input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]'
        ' output [ { name: "S" data_type: TYPE_FP32 dims: [ 4 ] } ]'
        ' ensemble_scheduling { step [ { model_name: "a" input_map { key: "I" value: "A" }'
        ' output_map { key: "O" value: "T" } }, { model_name: "b" input_map { key: "I" value: "T" }'
        ' output_map { key: "O" value: "S" } } ] }',
        PY + "model_metrics { metric_control [ { metric_identifier {"
        ' family: "nv_inference_first_response_histogram_ms" }'
        " histogram_options { buckets: [ 1, 10 ] } } ] }",
    ],
)
def test_valid(text: str) -> None:
    validate_config(_config(text))


def test_kind_gpu_with_gpus() -> None:
    validate_config(_config('backend: "python" instance_group [ { kind: KIND_GPU } ]', 1), gpu_count=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (IO, "must specify 'platform' or 'backend'"),
        ('platform: "foo"' + IO, "'backend' is empty for platform 'foo'"),
        (
            'backend: "onnxruntime" platform: "tensorrt_plan"' + IO,
            "unexpected 'platform' and 'backend' pair: platform 'tensorrt_plan', backend 'onnxruntime';"
            " backend 'onnxruntime' takes platform 'onnxruntime_onnx' (or none)",
        ),
        (
            'backend: "python" platform: "tensorrt_plan"' + IO,
            "platform 'tensorrt_plan' needs backend 'tensorrt'",
        ),
        ('backend: "python" max_batch_size: -1' + IO, "max_batch_size -1 is negative"),
        (
            PY + "input [ { data_type: TYPE_FP32 dims: [ 4 ] } ]",
            "input[0]: 'name' is empty",
        ),
        (
            PY + 'input [ { name: "IN" dims: [ 4 ] } ]',
            "input[0] 'IN': 'data_type' is not set",
        ),
        (
            'backend: "python" model_repository_agents { agents [ { name: "cipher" } ] }' + IO,
            "model_repository_agents: naiad runs only the 'checksum' repository agent, and agent 'cipher' would not "
            "run",
        ),
        (
            PY + 'input [ { name: "IN" data_type: 99 dims: [ 4 ] } ]',
            "input[0] 'IN': data_type 99 is not a datatype; use a name such as TYPE_FP32",
        ),
        (PY + 'input [ { name: "IN" data_type: TYPE_FP32 } ]', "input[0] 'IN': 'dims' is empty"),
        (
            'backend: "python" output [ { name: "O" data_type: TYPE_FP32 dims: [ 0 ] } ]',
            "output[0] 'O': dims [0]: each dimension must be >= 1, or -1 for a variable size",
        ),
        (
            PY + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape { shape: [ 5 ] } } ]',
            "input[0] 'IN': reshape [5] has a different number of elements than dims [2, 3]",
        ),
        (
            PY + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1, 6 ] reshape { shape: [ 6, -1 ] } } ]',
            "reshape [6, -1] has a different number of elements than dims [-1, 6]",
        ),
        (
            PY + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]',
            "an empty reshape (scalar) needs a batching model (max_batch_size > 0)",
        ),
        (
            PY + 'input [ { name: "IN" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 4, 4 ] } ]',
            "format FORMAT_NHWC requires exactly 3 dims, got [4, 4]",
        ),
        (
            PY + 'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 4 ] is_shape_tensor: true } ]',
            "is_shape_tensor is only supported for TensorRT models",
        ),
        (
            'backend: "python" max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 16 ] }' + IO,
            "dynamic_batching.preferred_batch_size 16 is out of range; valid: [1, 8] (max_batch_size)",
        ),
        (
            DYN + "{ priority_levels: 2 }",
            "dynamic_batching.default_priority_level 0 must be in [1, 2] when priority_levels is 2",
        ),
        (
            DYN + "{ priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 5 value: { } } }",
            "dynamic_batching.priority_queue_policy key 5 is not a priority level; valid: [1, 2]",
        ),
        (
            DYN + "{ preserve_ordering: true priority_levels: 2 default_priority_level: 1 }",
            "preserve_ordering allows only one priority level, not 2",
        ),
        (
            SEQ + 'sequence_batching { control_input [ { name: "S1" control [ { kind: CONTROL_SEQUENCE_START'
            ' int32_false_true: [ 0, 1 ] } ] }, { name: "S2" control [ { kind: CONTROL_SEQUENCE_START'
            " int32_false_true: [ 0, 1 ] } ] } ] }",
            "control_input[1] 'S2': CONTROL_SEQUENCE_START is already given by control input 'S1'",
        ),
        (
            SEQ + 'sequence_batching { control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START'
            " int32_false_true: [ 0 ] } ] } ] }",
            "CONTROL_SEQUENCE_START int32_false_true must have exactly 2 entries [false, true]",
        ),
        (
            SEQ + 'sequence_batching { control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_END'
            " int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] } ] } ] }",
            "CONTROL_SEQUENCE_END needs exactly one of int32_false_true, fp32_false_true, bool_false_true"
            " (got int32_false_true and fp32_false_true)",
        ),
        (
            SEQ + 'sequence_batching { control_input [ { name: "R" control [ { kind: CONTROL_SEQUENCE_READY } ] } ] }',
            "CONTROL_SEQUENCE_READY needs exactly one of int32_false_true, fp32_false_true, bool_false_true"
            " (none is set)",
        ),
        (
            SEQ + 'sequence_batching { control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID'
            " data_type: TYPE_FP32 } ] } ] }",
            "CONTROL_SEQUENCE_CORRID data_type TYPE_FP32 is not allowed; use TYPE_UINT64, TYPE_INT64,"
            " TYPE_UINT32, TYPE_INT32, TYPE_STRING",
        ),
        (
            SEQ + 'sequence_batching { control_input [ { name: "X" } ] }',
            "control_input[0] 'X': has no 'control'",
        ),
        (
            SEQ + "sequence_batching { oldest { preferred_batch_size: [ 3 ] } }",
            "sequence_batching.oldest.preferred_batch_size 3 is out of range; valid: [1, 2]",
        ),
        (
            SEQ + "sequence_batching { direct { minimum_slot_utilization: 1.5 } }",
            "sequence_batching.direct.minimum_slot_utilization 1.5 must be in [0, 1]",
        ),
        (
            SEQ + 'sequence_batching { state [ { input_name: "IS" output_name: "OS" data_type: TYPE_FP32'
            " dims: [ 0 ] } ] }",
            "sequence_batching.state[0]: dims [0]: give each dimension as >= 1 or -1",
        ),
        (
            'backend: "python" input [ { name: "I" data_type: TYPE_FP32 dims: [ 1 ] },'
            ' { name: "I" data_type: TYPE_INT32 dims: [ 2 ] } ]'
            ' output [ { name: "O" data_type: TYPE_FP32 dims: [ 1 ] } ]',
            "input[1] 'I': input[0] has the same name; rename one",
        ),
        (
            SEQ + "sequence_batching { } response_cache { enable: true }",
            "Response Cache does not currently support model m with sequence batching scheduler. Please disable "
            "the response cache.",
        ),
        (
            PY + "model_transaction_policy { decoupled: true } response_cache { enable: true }" + IO,
            "Response Cache does not currently support model m with 'decoupled' transaction policy. Please disable "
            "the response cache.",
        ),
        (
            'backend: "python" instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]' + IO,
            "instance_group[0] 'm_0': kind KIND_CPU must not list gpus [0]",
        ),
        (
            'backend: "python" instance_group [ { kind: KIND_CPU profile: "0" } ]' + IO,
            "instance_group[0] 'm_0': 'profile' is only supported for TensorRT models",
        ),
        (
            PY + 'model_metrics { metric_control [ { metric_identifier { family: "f" } } ] }',
            "model_metrics.metric_control[0]: histogram_options.buckets is empty",
        ),
        (
            PY + "model_metrics { metric_control [ { histogram_options { buckets: 1 } } ] }",
            "model_metrics.metric_control[0]: metric_identifier.family is empty",
        ),
        (
            'backend: "python" ensemble_scheduling { }' + IO,
            "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble",
        ),
        ('platform: "ensemble"' + IO, "must specify 'step' for ensemble 'm'"),
        (
            'platform: "ensemble" backend: "python" ensemble_scheduling { }' + IO,
            "backend 'python' must be empty for platform 'ensemble'",
        ),
        (
            'platform: "ensemble" instance_group [ { kind: KIND_CPU } ] ensemble_scheduling { }' + IO,
            "instance group should not be specified for ensemble 'm'",
        ),
    ],
)
def test_invalid(text: str, expected: str) -> None:
    assert expected in _error(text)


def test_kind_gpu_without_gpus() -> None:
    message = _error('backend: "python" instance_group [ { kind: KIND_GPU } ]' + IO)
    assert message == (
        "model 'm': instance_group[0] 'm_0': kind KIND_GPU but no GPUs are available;"
        " use kind: KIND_CPU (or KIND_AUTO) or run on a host with GPUs"
    )


def test_gpu_ids_out_of_range() -> None:
    message = _error('backend: "python" instance_group [ { kind: KIND_GPU gpus: [ 0, 3 ] } ]' + IO, 2)
    assert "gpus [3] do not exist; valid ids: 0..1" in message


def test_name_must_match_directory() -> None:
    with pytest.raises(NaiadError, match="name 'other' differs from the directory name 'm'"):
        validate_config(_config('name: "other" backend: "python"'), model_dir_name="m")


def test_all_problems_are_listed() -> None:
    message = _error('backend: "python" max_batch_size: -2 input [ { name: "A" dims: [ 0 ] } ]')
    assert message.startswith("model 'm' has 3 config errors: ")
    assert "max_batch_size -2" in message
    assert "'data_type' is not set" in message
    assert "dims [0]" in message


def test_each_problem_is_listed_on_its_own() -> None:
    with pytest.raises(ConfigInvalid) as caught:
        validate_config(_config('backend: "python" max_batch_size: -2 input [ { name: "A" dims: [ 0 ] } ]'))
    problems = caught.value.problems
    assert len(problems) == 3
    assert problems[0] == "max_batch_size -2 is negative; use 0 (no batching) or more"
    assert all(problem in caught.value.message for problem in problems)
