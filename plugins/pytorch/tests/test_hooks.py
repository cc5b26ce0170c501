"""The backend's hooks in-process: naming conventions, result kinds, datatypes, parameters, auto-complete."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from naiad.backend import DataType, ErrorCode, NaiadError
from naiad.testing import ModelRepositoryBuilder
from naiad_pytorch.instance import PytorchInstance

from .conftest import LoadModel, load_error
from .models import (
    TORCHSCRIPT_DEPRECATION,
    Accumulate,
    AddSub,
    DictIn,
    DictOut,
    Int64Affine,
    Linear,
    MixedNames,
    NamedArgs,
    RaggedOffsets,
    Stats,
    Upper,
    add_torch_model,
    fp32,
    reference,
    scripted,
    traced,
)

pytestmark = TORCHSCRIPT_DEPRECATION

ADD_SUB_CONFIG = """
max_batch_size: 8
input [
  { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""


def test_named_index_inputs_and_tuple_outputs(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    path = add_torch_model(model_repository, "add_sub", scripted(AddSub()), ADD_SUB_CONFIG)
    model = load("add_sub")
    assert model.config.platform == "pytorch_libtorch"
    assert model.config.backend == "pytorch"
    a, b = fp32(3, 4, seed=1), fp32(3, 4, seed=2)
    outputs = model.infer({"INPUT__0": a, "INPUT__1": b})
    expected = reference(path, a, b)
    np.testing.assert_allclose(outputs["OUTPUT__0"], expected[0])
    np.testing.assert_allclose(outputs["OUTPUT__1"], expected[1])


def test_outputs_by_index_not_config_order(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    swapped = ADD_SUB_CONFIG.replace('"OUTPUT__0"', '"TMP"').replace('"OUTPUT__1"', '"OUTPUT__0"')
    add_torch_model(model_repository, "swapped", scripted(AddSub()), swapped.replace('"TMP"', '"OUTPUT__1"'))
    model = load("swapped")
    assert [output.name for output in model.config.output] == ["OUTPUT__1", "OUTPUT__0"]
    a, b = fp32(1, 4), fp32(1, 4, seed=5)
    outputs = model.infer({"INPUT__0": a, "INPUT__1": b})
    np.testing.assert_allclose(outputs["OUTPUT__0"], a + b)
    np.testing.assert_allclose(outputs["OUTPUT__1"], a - b)


def test_forward_argument_names_bind_inputs(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    config = """
    max_batch_size: 4
    input [ { name: "scale" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
    output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
    """
    path = add_torch_model(model_repository, "named", scripted(NamedArgs()), config)
    x, scale = fp32(2, 2, seed=3), fp32(2, 2, seed=4)
    outputs = load("named").infer({"x": x, "scale": scale})
    np.testing.assert_allclose(outputs["OUTPUT__0"], reference(path, x=x, scale=scale))


def test_other_names_follow_config_order(
    model_repository: ModelRepositoryBuilder, load: LoadModel, caplog: pytest.LogCaptureFixture
) -> None:
    config = """
    input [ { name: "FIRST" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "SECOND" data_type: TYPE_FP32 dims: [ 2 ] } ]
    output [ { name: "RESULT" data_type: TYPE_FP32 dims: [ 2 ] } ]
    """
    add_torch_model(model_repository, "ordered", scripted(NamedArgs()), config)
    first, second = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    outputs = load("ordered").infer({"FIRST": first, "SECOND": second})
    np.testing.assert_allclose(outputs["RESULT"], first * second + 1)
    # As in Triton, only a "<name>__<index>" whose index is not a number is warned about.
    assert "Falling back to enforcing strict ordering" not in caplog.text
    add_torch_model(model_repository, "bad_index", scripted(NamedArgs()), config.replace('"FIRST"', '"FIRST__a"'))
    load("bad_index")
    assert (
        "input 'FIRST__a' or previous input(s) are neither an input argument to the model 'bad_index' nor do they "
        "follow the <name>__<index> naming convention. Falling back to enforcing strict ordering from model "
        "configuration."
    ) in caplog.text


def test_argument_and_index_names_mixed_follow_config_order(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    """Triton's io_names QA ``test_mix_arguments_index``: ``INPUT0`` (an argument) with ``INPUT__1``."""
    config = """
    max_batch_size: 8
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [
      { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
      { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }
    ]
    """
    add_torch_model(model_repository, "mixed", scripted(MixedNames()), config)
    a, b = fp32(2, 4, seed=1), fp32(2, 4, seed=2)
    outputs = load("mixed").infer({"INPUT0": a, "INPUT__1": b})
    np.testing.assert_allclose(outputs["OUTPUT0"], a - b)
    np.testing.assert_allclose(outputs["OUTPUT__1"], a + b)


def test_dict_input_and_dict_output(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    add_torch_model(
        model_repository,
        "dict_in",
        scripted(DictIn()),
        """
        max_batch_size: 2
        input [ { name: "b" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "a" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        """,
    )
    add_torch_model(
        model_repository,
        "dict_out",
        scripted(DictOut()),
        """
        max_batch_size: 2
        input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [
          { name: "total" data_type: TYPE_FP32 dims: [ 1 ] },
          { name: "double" data_type: TYPE_FP32 dims: [ 3 ] }
        ]
        """,
    )
    a, b = fp32(2, 3, seed=6), fp32(2, 3, seed=7)
    np.testing.assert_allclose(load("dict_in").infer({"a": a, "b": b})["OUTPUT__0"], a - b)
    outputs = load("dict_out").infer({"INPUT__0": a})
    np.testing.assert_allclose(outputs["double"], a * 2)
    np.testing.assert_allclose(outputs["total"], a.sum(1, keepdims=True), rtol=1e-6)


def test_int64_and_mixed_output_types(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    add_torch_model(
        model_repository,
        "int64",
        scripted(Int64Affine()),
        """
        input [ { name: "INPUT__0" data_type: TYPE_INT64 dims: [ -1 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_INT64 dims: [ -1 ] } ]
        """,
    )
    values = np.array([-(2**40), 0, 7], np.int64)
    assert load("int64").infer({"INPUT__0": values})["OUTPUT__0"].tolist() == (values * 3 + 1).tolist()
    add_torch_model(
        model_repository,
        "stats",
        scripted(Stats()),
        """
        max_batch_size: 4
        input [ { name: "INPUT__0" data_type: TYPE_FP64 dims: [ 3 ] } ]
        output [
          { name: "OUTPUT__0" data_type: TYPE_FP64 dims: [ 3 ] },
          { name: "OUTPUT__1" data_type: TYPE_FP64 dims: [ 1 ] },
          { name: "OUTPUT__2" data_type: TYPE_INT64 dims: [ 1 ] }
        ]
        """,
    )
    data = np.array([[1.0, 5.0, 2.0], [9.0, 0.0, 1.0]])
    outputs = load("stats").infer({"INPUT__0": data})
    assert outputs["OUTPUT__2"].dtype == np.int64
    assert outputs["OUTPUT__2"].tolist() == [[1], [0]]
    np.testing.assert_allclose(outputs["OUTPUT__1"], [[8.0], [10.0]])


def test_traced_module(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    path = add_torch_model(
        model_repository,
        "linear",
        traced(Linear(), torch.zeros(2, 4)),
        """
        max_batch_size: 8
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        """,
    )
    x = fp32(5, 4, seed=8)
    np.testing.assert_allclose(load("linear").infer({"x": x})["OUTPUT__0"], reference(path, x), rtol=1e-6)


def test_strings_travel_as_list_of_str(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    path = add_torch_model(
        model_repository,
        "upper",
        scripted(Upper()),
        """
        input [ { name: "words" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_STRING dims: [ -1 ] } ]
        """,
    )
    words = np.array([b"naiad", "gr\u00fc\u00df".encode(), b""], dtype=np.object_)
    expected = reference(path, ["naiad", "gr\u00fc\u00df", ""])
    assert expected == ["NAIAD", "GR\u00fc\u00df", ""]  # TorchScript's str.upper() is ASCII-only
    assert load("upper").infer({"words": words})["OUTPUT__0"].tolist() == [word.encode() for word in expected]


def test_bf16_round_trip(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    add_torch_model(
        model_repository,
        "bf16",
        scripted(Int64Affine()),
        """
        input [ { name: "INPUT__0" data_type: TYPE_BF16 dims: [ 3 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_BF16 dims: [ 3 ] } ]
        """,
    )
    values = torch.tensor([1.0, -2.0, 0.5], dtype=torch.bfloat16)
    bits = values.view(torch.int16).numpy().view(np.uint16)
    out = load("bf16").infer({"INPUT__0": bits})["OUTPUT__0"]
    assert out.dtype == np.uint16
    assert torch.from_numpy(out.view(np.int16)).view(torch.bfloat16).tolist() == [4.0, -5.0, 2.5]


def test_output_datatype_mismatch_fails_the_request(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    add_torch_model(
        model_repository,
        "wrong_type",
        scripted(Int64Affine()),
        """
        input [ { name: "INPUT__0" data_type: TYPE_INT64 dims: [ 2 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
        """,
    )
    response = load("wrong_type").respond({"INPUT__0": np.array([1, 2], np.int64)})
    assert response.error is not None
    assert response.error.code is ErrorCode.INVALID_ARG
    assert response.error.message == (
        "configuration expects datatype TYPE_FP32 for output 'OUTPUT__0', model provides TYPE_INT64"
    )


def test_forward_errors_fail_the_request(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    add_torch_model(
        model_repository, "add_sub", scripted(AddSub()), ADD_SUB_CONFIG.replace("dims: [ 4 ] }", "dims: [ -1 ] }")
    )
    response = load("add_sub").respond({"INPUT__0": fp32(1, 4), "INPUT__1": fp32(1, 3)})
    assert response.error is not None
    assert response.error.code is ErrorCode.INTERNAL
    assert response.error.message == (
        "PyTorch execute failure: RuntimeError: The size of tensor a (4) must match the size of tensor b (3) "
        "at non-singleton dimension 1"
    )


THIRD_INPUT = '{ name: "INPUT__2" data_type: TYPE_FP32 dims: [ 4 ] }'
FIRST_INPUT = '{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }'
SECOND_INPUT = '{ name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] }'


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            ADD_SUB_CONFIG.replace(SECOND_INPUT, f"{SECOND_INPUT}, {THIRD_INPUT}"),
            "configuration expects 3 inputs, model provides 2",
        ),
        (ADD_SUB_CONFIG.replace('"INPUT__1"', '"INPUT__5"'), "input 'INPUT__5' refers to forward argument index 5"),
        (
            ADD_SUB_CONFIG.replace('"OUTPUT__1"', '"OUTPUT__2"'),
            "The output OUTPUT__2 in the model configuration refers to an output index which doesn't exist. "
            "This model has 2 outputs",
        ),
        (
            ADD_SUB_CONFIG.replace(FIRST_INPUT, FIRST_INPUT.replace("FP32", "UINT32")),
            "unsupported datatype TYPE_UINT32 for input 'INPUT__0'",
        ),
        (
            ADD_SUB_CONFIG.replace("max_batch_size: 8", "max_batch_size: 0").replace(
                SECOND_INPUT, SECOND_INPUT.replace("FP32", "STRING")
            ),
            "input 'INPUT__1' is TYPE_STRING but forward argument 'INPUT__1' is a Tensor",
        ),
    ],
    ids=["input-count", "input-index", "output-index", "unsupported-type", "string-for-tensor"],
)
def test_config_model_mismatches_fail_the_load(
    model_repository: ModelRepositoryBuilder, load: LoadModel, config: str, message: str
) -> None:
    path = add_torch_model(model_repository, "broken", scripted(AddSub()), config)
    error = load_error(load, "broken")
    assert error.startswith(f"unable to load model 'broken' ({path}): ")
    assert message in error
    assert "forward(INPUT__0: Tensor, INPUT__1: Tensor) -> Tuple[Tensor, Tensor]" in error


def test_missing_and_corrupt_files(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    model_repository.add_model("missing", 'platform: "pytorch_libtorch"' + ADD_SUB_CONFIG, {"1/README": "no model"})
    assert load_error(load, "missing").startswith(
        f"unable to find '{model_repository.root / 'missing' / '1' / 'model.pt'}' for model 'missing'"
    )
    model_repository.add_model("corrupt", ADD_SUB_CONFIG, {"1/model.pt": b"not a zip archive"})
    error = load_error(load, "corrupt")
    assert error.startswith("failed to load model 'corrupt': RuntimeError: PytorchStreamReader failed")
    assert "must be a TorchScript archive written by torch.jit.save" in error


def test_bad_parameter_value(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    config = ADD_SUB_CONFIG + 'parameters { key: "INFERENCE_MODE" value: { string_value: "maybe" } }'
    add_torch_model(model_repository, "bad_param", scripted(AddSub()), config)
    assert load_error(load, "bad_param") == (
        "model 'bad_param': parameter 'INFERENCE_MODE': failed to convert 'maybe' to boolean "
        "(use true/false, on/off or 1/0)"
    )


def test_execution_flags_follow_parameters(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    config = (
        ADD_SUB_CONFIG
        + """
    parameters [
      { key: "DISABLE_OPTIMIZED_EXECUTION" value: { string_value: "true" } },
      { key: "INFERENCE_MODE" value: { string_value: "off" } }
    ]
    """
    )
    add_torch_model(model_repository, "flags", scripted(AddSub()), config)
    model = load("flags")
    try:
        model.infer({"INPUT__0": fp32(1, 4), "INPUT__1": fp32(1, 4)})
        assert torch._C._get_graph_executor_optimize() is False  # per thread, set by the execution
    finally:
        torch._C._set_graph_executor_optimize(True)


def test_weight_sharing_shares_one_module_per_device(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    group = "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
    sharing = 'parameters { key: "ENABLE_WEIGHT_SHARING" value: { string_value: "true" } }'
    add_torch_model(model_repository, "own", scripted(AddSub()), ADD_SUB_CONFIG + group)
    add_torch_model(model_repository, "shared", scripted(AddSub()), ADD_SUB_CONFIG + group + sharing)
    own, shared = load("own").instances, load("shared").instances
    assert all(isinstance(instance, PytorchInstance) for instance in own + shared)
    modules = [instance.call.module for instance in own if isinstance(instance, PytorchInstance) and instance.call]
    assert modules[0] is not modules[1]
    modules = [instance.call.module for instance in shared if isinstance(instance, PytorchInstance) and instance.call]
    assert modules[0] is modules[1]


def test_auto_complete_probes_missing_outputs(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    add_torch_model(
        model_repository,
        "stats",
        scripted(Stats()),
        """
        max_batch_size: 4
        input [ { data_type: TYPE_FP32 dims: [ -1 ] } ]
        """,
    )
    model = load("stats", auto_complete=True)
    assert [t.name for t in model.config.input] == ["data"]
    assert [(t.name, t.data_type, list(t.dims)) for t in model.config.output] == [
        ("OUTPUT__0", DataType.TYPE_FP32, [-1]),
        ("OUTPUT__1", DataType.TYPE_FP32, [1]),
        ("OUTPUT__2", DataType.TYPE_INT64, [1]),
    ]
    assert model.config.max_batch_size == 4
    assert not model.config.HasField("dynamic_batching")
    data = fp32(2, 5)
    np.testing.assert_allclose(model.infer({"data": data})["OUTPUT__0"], data * 2)


def test_auto_complete_fills_dict_outputs_and_checks_given_values(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    inputs = 'input [ { name: "x" data_type: TYPE_FP16 dims: [ 2, 3 ] } ]\n'
    add_torch_model(model_repository, "dict_out", scripted(DictOut()), inputs)
    model = load("dict_out", auto_complete=True)
    assert [(t.name, t.data_type, list(t.dims)) for t in model.config.output] == [
        ("double", DataType.TYPE_FP16, [2, 3]),
        ("total", DataType.TYPE_FP16, [2, 1]),
    ]
    partial = inputs + 'output [ { name: "total" data_type: TYPE_FP32 } ]'
    add_torch_model(model_repository, "conflict", scripted(DictOut()), partial)
    assert load_error(load, "conflict", auto_complete=True).endswith(
        "output 'total': config.pbtxt says data_type TYPE_FP32, the model produces TYPE_FP16"
    )
    shape = inputs + 'output [ { name: "double" dims: [ 2, 4 ] } ]'
    add_torch_model(model_repository, "bad_dims", scripted(DictOut()), shape)
    assert load_error(load, "bad_dims", auto_complete=True).endswith(
        "output 'double': config.pbtxt says dims [2, 4], the model produces [2, 3]"
    )


def test_auto_complete_without_config_lists_what_to_add(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    path = add_torch_model(model_repository, "bare", scripted(NamedArgs()), None)
    error = load_error(load, "bare", auto_complete=True)
    assert error.startswith(f"model 'bare': cannot auto-complete the configuration from '{path}': ")
    assert (
        "add the inputs to config.pbtxt: max_batch_size: <N, or 0 if the model has no batch dimension>, input [ "
        '{ name: "x" data_type: TYPE_<...> dims: [ ... ] }, { name: "scale" data_type: TYPE_<...> dims: [ ... ] } ]'
    ) in error


def test_auto_complete_needs_input_types(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    add_torch_model(model_repository, "untyped", scripted(NamedArgs()), 'input [ { name: "x" dims: [ 2 ] } ]')
    assert "input(s) ['x'] need data_type and dims in config.pbtxt" in load_error(load, "untyped", auto_complete=True)


def test_auto_complete_reports_a_failed_probe(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    inputs = """
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "scale" data_type: TYPE_FP32 dims: [ 3 ] } ]
    """
    add_torch_model(model_repository, "mismatched", scripted(NamedArgs()), inputs)
    error = load_error(load, "mismatched", auto_complete=True)
    assert "a probe run of forward() on zero-valued inputs of shapes {'x': [2], 'scale': [3]} failed (" in error
    assert "RuntimeError: The size of tensor a (2) must match the size of tensor b (3)" in error


def test_aoti_packages_are_not_supported(model_repository: ModelRepositoryBuilder, load: LoadModel) -> None:
    model_repository.add_model("aoti", None, {"1/model.pt2": b"PK"})
    with pytest.raises(NaiadError) as caught:
        load("aoti", auto_complete=True)
    assert "platform 'torch_aoti' (AOTInductor .pt2 packages) is not supported" in caught.value.message


SEQUENCE_CONFIG = """
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  control_input [
    { name: "START__2" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY__3" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
  state [ { input_name: "INPUT_STATE__1" output_name: "OUTPUT_STATE__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
}
"""


def test_sequence_controls_and_state_are_forward_arguments(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    add_torch_model(model_repository, "accumulate", scripted(Accumulate()), SEQUENCE_CONFIG)
    model = load("accumulate")
    column = np.array([[5], [7]], np.int32)
    outputs = model.infer(
        {
            "INPUT__0": column,
            "INPUT_STATE__1": np.array([[10], [10]], np.int32),
            "START__2": np.array([[1], [0]], np.int32),
            "READY__3": np.array([[1], [1]], np.int32),
        }
    )
    np.testing.assert_array_equal(outputs["OUTPUT__0"], [[5], [17]])  # the state counts unless at START


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("START__2", "START"),
            "input 'START' does not follow <name>__<index> naming convention.",
        ),
        (
            (
                "{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }",
                "{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }",
            ),
            "input 'READY__3' type 'TYPE_UINT64' is not supported by PyTorch.",
        ),
        (
            ('output_name: "OUTPUT_STATE__1"', 'output_name: "OUTPUT_STATE"'),
            "output state 'OUTPUT_STATE' does not follow the <name>__<index> naming convention",
        ),
        (
            ('input_name: "INPUT_STATE__1"', 'input_name: "INPUT_STATE"'),
            "input 'INPUT_STATE' (an implicit state or batch input) is neither an argument of forward() nor named",
        ),
        (
            ("data_type: TYPE_INT32 dims: [ 1 ] } ]\n}", "data_type: TYPE_UINT32 dims: [ 1 ] } ]\n}"),
            "unsupported datatype TYPE_UINT32 for input state 'INPUT_STATE__1' for model 'seq'",
        ),
    ],
    ids=["control-name", "control-type", "state-output-name", "state-input-name", "state-type"],
)
def test_sequence_tensor_mistakes_fail_the_load(
    model_repository: ModelRepositoryBuilder, load: LoadModel, edit: tuple[str, str], message: str
) -> None:
    config = SEQUENCE_CONFIG.replace(*edit)
    assert config != SEQUENCE_CONFIG
    add_torch_model(model_repository, "seq", scripted(Accumulate()), config)
    assert message in load_error(load, "seq")


def test_auto_complete_of_a_sequence_model_leaves_the_state_result_out(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    config = SEQUENCE_CONFIG.replace('output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]', "")
    add_torch_model(model_repository, "seq_auto", scripted(Accumulate()), config)
    model = load("seq_auto", auto_complete=True)
    assert [(o.name, o.data_type, list(o.dims)) for o in model.config.output] == [
        ("OUTPUT__0", DataType.TYPE_INT32, [1])
    ]


RAGGED_CONFIG = """
max_batch_size: 4
input [ { name: "X__0" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "COUNTS__1" data_type: TYPE_INT32 source_input: "X__0" }
]
output [ { name: "Y__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: "Y__0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X__0" } ]
dynamic_batching { }
"""


def test_ragged_batches_get_batch_inputs_and_scatter_outputs(
    model_repository: ModelRepositoryBuilder, load: LoadModel
) -> None:
    add_torch_model(model_repository, "ragged", scripted(RaggedOffsets()), RAGGED_CONFIG)
    loaded = load("ragged").loaded
    first, first_answers = loaded.request({"X__0": np.array([[1, 2, 3]], np.float32)}, batch_size=1)
    second, second_answers = loaded.request({"X__0": np.array([[4, 5]], np.float32)}, batch_size=1)
    loaded.execute([first, second])  # one engine call: X__0 is [1, 2, 3, 4, 5], COUNTS__1 is [3, 5]
    np.testing.assert_array_equal(first_answers.only().outputs[0].numpy(), [[1, 2, 3]])
    np.testing.assert_array_equal(second_answers.only().outputs[0].numpy(), [[14, 15]])
