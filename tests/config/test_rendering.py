"""Triton's JSON rendering, checked against a real Triton 2.51 server.

Each ``*_TRITON`` literal is the body of ``GET /v2/models/<m>/config`` that
Triton 2.51 (CPU only, python backend) served for the ``*_PBTXT`` next to it
with a ``1/model.py`` in the model directory. naiad must produce the same text
after ``read_model_config`` + ``detect_backend`` + ``fill_defaults``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from naiad.config import (
    config_from_json,
    config_to_json,
    config_to_json_dict,
    detect_backend,
    fill_defaults,
    parse_model_config,
    read_model_config,
)
from naiad.protocol.model_config_pb2 import ModelConfig, ModelSequenceBatching

# add_sub
ADD_SUB_PBTXT = """\
backend: "python"
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""

ADD_SUB_TRITON = (
    '{"name":"add_sub","platform":"","backend":"python","runtime":"","version_policy":{"latest":{"num'
    '_versions":1}},"max_batch_size":0,"input":[{"name":"INPUT0","data_type":"TYPE_FP32","format":"FO'
    'RMAT_NONE","dims":[4],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_no'
    'n_linear_format_io":false},{"name":"INPUT1","data_type":"TYPE_FP32","format":"FORMAT_NONE","dims'
    '":[4],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_linear_format_'
    'io":false}],"output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[4],"label_filename":"","'
    'is_shape_tensor":false,"is_non_linear_format_io":false},{"name":"OUTPUT1","data_type":"TYPE_FP32'
    '","dims":[4],"label_filename":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batc'
    'h_input":[],"batch_output":[],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory'
    '":{"enable":true},"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eag'
    'er_batching":false},"instance_group":[{"name":"add_sub","kind":"KIND_CPU","count":1,"gpus":[],"s'
    'econdary_devices":[],"profile":[],"passive":false,"host_policy":""}],"default_model_filename":"m'
    'odel.py","cc_model_filenames":{},"metric_tags":{},"parameters":{},"model_warmup":[]}'
)


# batcher
BATCHER_PBTXT = """\
name: "batcher"
backend: "python"
max_batch_size: 8
version_policy: { specific: { versions: [1, 3] } }
input [
  { name: "IN" data_type: TYPE_INT64 dims: [ -1 ] optional: true },
  { name: "S" data_type: TYPE_STRING dims: [ 1 ] reshape: { shape: [] } }
]
output [ { name: "OUT" data_type: TYPE_INT64 dims: [ -1 ] label_filename: "" } ]
dynamic_batching {
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 max_queue_size: 7 }
  priority_queue_policy {
    key: 2 value: { default_timeout_microseconds: 9000 allow_timeout_override: true }
  }
}
instance_group [ { count: 2 kind: KIND_CPU }, { name: "named" kind: KIND_CPU } ]
parameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "no" } }
parameters: { key: "a_param" value: { string_value: "1" } }
metric_tags { key: "team" value: "x" }
model_transaction_policy { decoupled: false }
"""

BATCHER_TRITON = (
    '{"name":"batcher","platform":"","backend":"python","runtime":"","version_policy":{"specific":{"v'
    'ersions":[1,3]}},"max_batch_size":8,"input":[{"name":"IN","data_type":"TYPE_INT64","format":"FOR'
    'MAT_NONE","dims":[-1],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":true,"is_non'
    '_linear_format_io":false},{"name":"S","data_type":"TYPE_STRING","format":"FORMAT_NONE","dims":[1'
    '],"reshape":{"shape":[]},"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is'
    '_non_linear_format_io":false}],"output":[{"name":"OUT","data_type":"TYPE_INT64","dims":[-1],"lab'
    'el_filename":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_input":[],"batc'
    'h_output":[],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true}'
    ',"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":fals'
    'e},"dynamic_batching":{"preferred_batch_size":[8],"max_queue_delay_microseconds":100,"preserve_o'
    'rdering":false,"priority_levels":2,"default_priority_level":1,"default_queue_policy":{"timeout_a'
    'ction":"DELAY","default_timeout_microseconds":5000,"allow_timeout_override":false,"max_queue_siz'
    'e":7},"priority_queue_policy":{"2":{"timeout_action":"REJECT","default_timeout_microseconds":900'
    '0,"allow_timeout_override":true,"max_queue_size":0}}},"instance_group":[{"name":"batcher_0","kin'
    'd":"KIND_CPU","count":2,"gpus":[],"secondary_devices":[],"profile":[],"passive":false,"host_poli'
    'cy":""},{"name":"named","kind":"KIND_CPU","count":1,"gpus":[],"secondary_devices":[],"profile":['
    '],"passive":false,"host_policy":""}],"default_model_filename":"model.py","cc_model_filenames":{}'
    ',"metric_tags":{"team":"x"},"parameters":{"FORCE_CPU_ONLY_INPUT_TENSORS":{"string_value":"no"},"'
    'a_param":{"string_value":"1"}},"model_warmup":[],"model_transaction_policy":{"decoupled":false}}'
)


# seq
SEQ_PBTXT = """\
backend: "python"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  direct { max_queue_delay_microseconds: 50 minimum_slot_utilization: 0.5 }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
"""

SEQ_TRITON = (
    '{"name":"seq","platform":"","backend":"python","runtime":"","version_policy":{"latest":{"num_ver'
    'sions":1}},"max_batch_size":4,"input":[{"name":"IN","data_type":"TYPE_INT32","format":"FORMAT_NO'
    'NE","dims":[1],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_linea'
    'r_format_io":false}],"output":[{"name":"OUT","data_type":"TYPE_INT32","dims":[1],"label_filename'
    '":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_input":[],"batch_output":['
    '],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},"output_pi'
    'nned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":false},"sequenc'
    'e_batching":{"direct":{"max_queue_delay_microseconds":50,"minimum_slot_utilization":0.5},"max_se'
    'quence_idle_microseconds":1000000,"control_input":[{"name":"START","control":[{"kind":"CONTROL_S'
    'EQUENCE_START","int32_false_true":[0,1],"fp32_false_true":[],"bool_false_true":[],"data_type":"T'
    'YPE_INVALID"}]},{"name":"READY","control":[{"kind":"CONTROL_SEQUENCE_READY","int32_false_true":['
    '],"fp32_false_true":[0,1],"bool_false_true":[],"data_type":"TYPE_INVALID"}]},{"name":"END","cont'
    'rol":[{"kind":"CONTROL_SEQUENCE_END","int32_false_true":[],"fp32_false_true":[],"bool_false_true'
    '":[false,true],"data_type":"TYPE_INVALID"}]},{"name":"CORRID","control":[{"kind":"CONTROL_SEQUEN'
    'CE_CORRID","int32_false_true":[],"fp32_false_true":[],"bool_false_true":[],"data_type":"TYPE_UIN'
    'T64"}]}],"state":[],"iterative_sequence":false},"instance_group":[{"name":"seq","kind":"KIND_CPU'
    '","count":1,"gpus":[],"secondary_devices":[],"profile":[],"passive":false,"host_policy":""}],"de'
    'fault_model_filename":"model.py","cc_model_filenames":{},"metric_tags":{},"parameters":{},"model'
    '_warmup":[]}'
)


# misc
MISC_PBTXT = """\
backend: "python"
max_batch_size: 2
input [ { name: "X" data_type: TYPE_FP16 dims: [ 2, 3 ] reshape { shape: [ 6 ] } } ]
output [ { name: "Y" data_type: TYPE_BOOL dims: [ 1 ] } ]
sequence_batching {
  oldest { max_candidate_sequences: 3 max_queue_delay_microseconds: 7 }
  max_sequence_idle_microseconds: 5000000
}
optimization {
  cuda {
    graphs: true
    graph_spec [ {
      batch_size: 2
      input { key: "X" value { dim: [ 2, 3 ] } }
      graph_lower_bound { batch_size: 1 input { key: "X" value { dim: [ 1, 3 ] } } }
    } ]
  }
  input_pinned_memory { enable: false }
  priority: PRIORITY_MAX
}
instance_group [ {
  kind: KIND_CPU
  count: 1
  rate_limiter { resources [ { name: "R" global: true count: 2 } ] priority: 2 }
} ]
model_warmup [ {
  name: "w"
  batch_size: 2
  inputs { key: "X" value: { data_type: TYPE_FP16 dims: [ 2, 3 ] zero_data: true } }
} ]
response_cache { enable: false }
cc_model_filenames { key: "8.0" value: "m.py" }
"""

MISC_TRITON = (
    '{"name":"misc","platform":"","backend":"python","runtime":"","version_policy":{"latest":{"num_ve'
    'rsions":1}},"max_batch_size":2,"input":[{"name":"X","data_type":"TYPE_FP16","format":"FORMAT_NON'
    'E","dims":[2,3],"reshape":{"shape":[6]},"is_shape_tensor":false,"allow_ragged_batch":false,"opti'
    'onal":false,"is_non_linear_format_io":false}],"output":[{"name":"Y","data_type":"TYPE_BOOL","dim'
    's":[1],"label_filename":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_inpu'
    't":[],"batch_output":[],"optimization":{"priority":"PRIORITY_MAX","cuda":{"graphs":true,"busy_wa'
    'it_events":false,"graph_spec":[{"batch_size":2,"input":{"X":{"dim":["2","3"]}},"graph_lower_boun'
    'd":{"batch_size":1,"input":{"X":{"dim":["1","3"]}}}}],"output_copy_stream":false},"input_pinned_'
    'memory":{"enable":false},"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold"'
    ':0,"eager_batching":false},"sequence_batching":{"oldest":{"max_candidate_sequences":3,"preferred'
    '_batch_size":[2],"max_queue_delay_microseconds":7,"preserve_ordering":false},"max_sequence_idle_'
    'microseconds":5000000,"control_input":[],"state":[],"iterative_sequence":false},"instance_group"'
    ':[{"name":"misc_0","kind":"KIND_CPU","count":1,"rate_limiter":{"resources":[{"name":"R","global"'
    ':true,"count":2}],"priority":2},"gpus":[],"secondary_devices":[],"profile":[],"passive":false,"h'
    'ost_policy":""}],"default_model_filename":"model.py","cc_model_filenames":{"8.0":"m.py"},"metric'
    '_tags":{},"parameters":{},"model_warmup":[{"name":"w","batch_size":2,"inputs":{"X":{"data_type":'
    '"TYPE_FP16","dims":[2,3],"zero_data":true}},"count":0}],"response_cache":{"enable":false}}'
)


# state
STATE_PBTXT = """\
backend: "python"
max_batch_size: 2
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
sequence_batching {
  oldest { max_candidate_sequences: 2 }
  state [ {
    input_name: "INPUT_STATE"
    output_name: "OUTPUT_STATE"
    data_type: TYPE_INT32
    dims: [ 1 ]
    initial_state: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "init" }
  } ]
}
"""

STATE_TRITON = (
    '{"name":"e_state","platform":"","backend":"python","runtime":"","version_policy":{"latest":{"num'
    '_versions":1}},"max_batch_size":2,"input":[{"name":"IN","data_type":"TYPE_FP32","format":"FORMAT'
    '_NONE","dims":[4],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_li'
    'near_format_io":false}],"output":[{"name":"OUT","data_type":"TYPE_FP32","dims":[4],"label_filena'
    'me":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_input":[],"batch_output"'
    ':[],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},"output_'
    'pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":false},"seque'
    'nce_batching":{"oldest":{"max_candidate_sequences":2,"preferred_batch_size":[2],"max_queue_delay'
    '_microseconds":0,"preserve_ordering":false},"max_sequence_idle_microseconds":1000000,"control_in'
    'put":[],"state":[{"input_name":"INPUT_STATE","output_name":"OUTPUT_STATE","data_type":"TYPE_INT3'
    '2","dims":[1],"initial_state":[{"data_type":"TYPE_INT32","dims":["1"],"name":"init","zero_data":'
    'true}],"use_same_buffer_for_input_output":false,"use_growable_memory":false}],"iterative_sequenc'
    'e":false},"instance_group":[{"name":"e_state","kind":"KIND_CPU","count":1,"gpus":[],"secondary_d'
    'evices":[],"profile":[],"passive":false,"host_policy":""}],"default_model_filename":"model.py","'
    'cc_model_filenames":{},"metric_tags":{},"parameters":{},"model_warmup":[]}'
)


# secdev
SECDEV_PBTXT = """\
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU secondary_devices [ { kind: KIND_NVDLA device_id: 3 } ] } ]
"""

SECDEV_TRITON = (
    '{"name":"e_secdev","platform":"","backend":"python","runtime":"","version_policy":{"latest":{"nu'
    'm_versions":1}},"max_batch_size":0,"input":[{"name":"IN","data_type":"TYPE_FP32","format":"FORMA'
    'T_NONE","dims":[4],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_l'
    'inear_format_io":false}],"output":[{"name":"OUT","data_type":"TYPE_FP32","dims":[4],"label_filen'
    'ame":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_input":[],"batch_output'
    '":[],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},"output'
    '_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":false},"inst'
    'ance_group":[{"name":"e_secdev_0","kind":"KIND_CPU","count":1,"gpus":[],"secondary_devices":[{"k'
    'ind":"KIND_NVDLA","device_id":"3"}],"profile":[],"passive":false,"host_policy":""}],"default_mod'
    'el_filename":"model.py","cc_model_filenames":{},"metric_tags":{},"parameters":{},"model_warmup":'
    "[]}"
)


# ens
ENS_PBTXT = """\
platform: "ensemble"
max_batch_size: 0
input [
  { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "B" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [ { name: "S" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [ {
    model_name: "add_sub"
    model_version: -1
    input_map { key: "INPUT0" value: "A" }
    input_map { key: "INPUT1" value: "B" }
    output_map { key: "OUTPUT0" value: "S" }
  } ]
}
"""

ENS_TRITON = (
    '{"name":"e_ens","platform":"ensemble","backend":"","runtime":"","version_policy":{"latest":{"num'
    '_versions":1}},"max_batch_size":0,"input":[{"name":"A","data_type":"TYPE_FP32","format":"FORMAT_'
    'NONE","dims":[4],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_lin'
    'ear_format_io":false},{"name":"B","data_type":"TYPE_FP32","format":"FORMAT_NONE","dims":[4],"is_'
    'shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_linear_format_io":false}'
    '],"output":[{"name":"S","data_type":"TYPE_FP32","dims":[4],"label_filename":"","is_shape_tensor"'
    ':false,"is_non_linear_format_io":false}],"batch_input":[],"batch_output":[],"ensemble_scheduling'
    '":{"step":[{"model_name":"add_sub","model_version":-1,"input_map":{"INPUT1":"B","INPUT0":"A"},"o'
    'utput_map":{"OUTPUT0":"S"},"model_namespace":""}]},"instance_group":[],"default_model_filename":'
    '"","cc_model_filenames":{},"metric_tags":{},"parameters":{},"model_warmup":[],"model_transaction'
    '_policy":{"decoupled":false}}'
)


def _normalised(tmp_path: Path, name: str, pbtxt: str) -> ModelConfig:
    model_dir = tmp_path / name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text("")
    (model_dir / "config.pbtxt").write_text(pbtxt)
    config = read_model_config(model_dir)
    detect_backend(config, model_dir)
    fill_defaults(config)
    return config


@pytest.mark.parametrize(
    ("name", "pbtxt", "expected"),
    [
        ("add_sub", ADD_SUB_PBTXT, ADD_SUB_TRITON),
        ("batcher", BATCHER_PBTXT, BATCHER_TRITON),
        ("seq", SEQ_PBTXT, SEQ_TRITON),
        ("misc", MISC_PBTXT, MISC_TRITON),
        ("e_state", STATE_PBTXT, STATE_TRITON),
        ("e_secdev", SECDEV_PBTXT, SECDEV_TRITON),
    ],
)
def test_same_text_as_triton(tmp_path: Path, name: str, pbtxt: str, expected: str) -> None:
    config = _normalised(tmp_path, name, pbtxt)
    assert config_to_json(config) == expected
    assert config_to_json_dict(config) == json.loads(expected)


def test_ensemble_matches_triton(tmp_path: Path) -> None:
    # Triton 2.51 predates ensemble_scheduling.max_inflight_requests (our schema is tritonclient
    # 2.73's): unset, it is not printed. Triton prints maps in hash order ("INPUT1" first): we sort.
    rendered = config_to_json_dict(_normalised(tmp_path, "e_ens", ENS_PBTXT))
    assert "max_inflight_requests" not in rendered["ensemble_scheduling"]
    assert rendered == json.loads(ENS_TRITON)
    assert list(rendered["ensemble_scheduling"]["step"][0]["input_map"]) == ["INPUT0", "INPUT1"]


def test_top_level_keys_in_declaration_order() -> None:
    config = ModelConfig(name="m", backend="python")
    config.sequence_batching.SetInParent()
    config.model_transaction_policy.decoupled = True
    keys = list(config_to_json_dict(config))
    assert keys == [
        "name", "platform", "backend", "runtime", "max_batch_size", "input", "output", "batch_input",
        "batch_output", "sequence_batching", "instance_group", "default_model_filename",
        "cc_model_filenames", "metric_tags", "parameters", "model_warmup", "model_transaction_policy",
    ]  # fmt: skip


def test_unset_submessages_are_omitted_and_present_ones_full() -> None:
    rendered = config_to_json_dict(ModelConfig(name="m"))
    for absent in ("version_policy", "optimization", "dynamic_batching", "response_cache", "model_metrics"):
        assert absent not in rendered
    config = ModelConfig()
    config.response_cache.SetInParent()
    config.dynamic_batching.SetInParent()
    rendered = config_to_json_dict(config)
    assert rendered["response_cache"] == {"enable": False}
    assert rendered["dynamic_batching"] == {
        "preferred_batch_size": [],
        "max_queue_delay_microseconds": 0,
        "preserve_ordering": False,
        "priority_levels": 0,
        "default_priority_level": 0,
        "priority_queue_policy": {},
    }


def test_int64_numbers_and_strings() -> None:
    config = parse_model_config(
        """
        version_policy { specific { versions: [ 9007199254740993 ] } }
        dynamic_batching { priority_levels: 3 priority_queue_policy { key: 2 value { } } }
        instance_group { secondary_devices { device_id: 7 } }
        """,
        model_name="m",
    )
    rendered = config_to_json_dict(config)
    assert rendered["version_policy"]["specific"]["versions"] == [9007199254740993]
    assert rendered["dynamic_batching"]["priority_levels"] == 3
    assert list(rendered["dynamic_batching"]["priority_queue_policy"]) == ["2"]
    assert rendered["instance_group"][0]["secondary_devices"][0]["device_id"] == "7"  # as Triton
    ensemble = parse_model_config("ensemble_scheduling { step { model_version: -1 } }", model_name="e")
    assert config_to_json_dict(ensemble)["ensemble_scheduling"]["step"][0]["model_version"] == -1


def test_floats() -> None:
    config = ModelConfig()
    control = config.sequence_batching.control_input.add(name="R").control.add()
    control.kind = ModelSequenceBatching.Control.CONTROL_SEQUENCE_READY
    control.fp32_false_true.extend([0.1, 1.0, math.inf])
    config.model_metrics.metric_control.add().histogram_options.buckets.extend([0.1, 2.0])
    rendered = config_to_json_dict(config)
    assert rendered["sequence_batching"]["control_input"][0]["control"][0]["fp32_false_true"] == [
        0.1,
        1,
        "Infinity",
    ]
    assert rendered["model_metrics"]["metric_control"][0]["histogram_options"]["buckets"] == [0.1, 2]


def test_json_round_trip(tmp_path: Path) -> None:
    config = _normalised(tmp_path, "misc", MISC_PBTXT)
    assert config_from_json(config_to_json(config)) == config
    assert config_from_json(config_to_json_dict(config)) == config
