"""Auto-complete from the ONNX graph and the checks of a config against the model, through the real hooks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from naiad.backend import DataType, ErrorCode, NaiadError, config_to_json_dict

from . import onnx_models
from .conftest import error_of, floats, ort_reference, write_model


def _io(config: Any) -> dict[str, Any]:
    rendered = config_to_json_dict(config)
    return {key: rendered.get(key) for key in ("max_batch_size", "input", "output", "dynamic_batching")}


def test_no_config_at_all_is_completed_like_triton(repo: Path, load: Any) -> None:
    write_model(repo, "add_sub", onnx_models.add_sub())
    loaded = load("add_sub")
    config = loaded.config
    assert config.platform == "onnxruntime_onnx"
    assert config.backend == "onnxruntime"
    assert config.max_batch_size == 4
    assert config.HasField("dynamic_batching")
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("INPUT0", DataType.TYPE_FP32, [4]),
        ("INPUT1", DataType.TYPE_FP32, [4]),
    ]
    assert [(t.name, list(t.dims)) for t in config.output] == [("OUTPUT0", [4]), ("OUTPUT1", [4])]
    assert len(loaded.instances) == 2  # KIND_CPU defaults to two instances for onnxruntime
    a, b = floats(3, 4), floats(3, 4, seed=1)
    outputs = loaded.infer({"INPUT0": a, "INPUT1": b}).outputs()
    np.testing.assert_allclose(outputs["OUTPUT0"], a + b)
    np.testing.assert_allclose(outputs["OUTPUT1"], a - b)


def test_default_max_batch_size_comes_from_the_backend_config(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.add_sub())
    assert load("m", backend_config={"onnxruntime": {"default-max-batch-size": "16"}}).config.max_batch_size == 16


def test_the_global_default_max_batch_size_reaches_auto_complete(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.add_sub())
    assert load("m", backend_config={"": {"default-max-batch-size": "6"}}).config.max_batch_size == 6
    # The backend's own setting wins over the global one.
    both = {"": {"default-max-batch-size": "6"}, "onnxruntime": {"default-max-batch-size": "2"}}
    assert load("m", backend_config=both).config.max_batch_size == 2


def test_a_non_integer_default_max_batch_size_fails_the_load(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.add_sub())
    with pytest.raises(NaiadError) as caught:
        load("m", backend_config={"onnxruntime": {"default-max-batch-size": "lots"}})
    assert caught.value.code == ErrorCode.INVALID_ARG
    assert "--backend-config default-max-batch-size=lots (backend 'onnxruntime') is not an integer" in (
        caught.value.message
    )


def test_max_batch_size_one_gets_no_dynamic_batching(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.add_sub(), "max_batch_size: 1")
    config = load("m").config
    assert config.max_batch_size == 1
    assert not config.HasField("dynamic_batching")


def test_default_max_batch_size_zero_leaves_the_full_shapes(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.add_sub())
    config = load("m", backend_config={"onnxruntime": {"default-max-batch-size": "0"}}).config
    assert config.max_batch_size == 0
    assert [list(t.dims) for t in config.input] == [[-1, 4], [-1, 4]]
    assert not config.HasField("dynamic_batching")


def test_a_given_scheduler_is_kept(repo: Path, load: Any) -> None:
    write_model(
        repo, "m", onnx_models.add_sub(), "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 100 }"
    )
    config = load("m").config
    assert config.max_batch_size == 8
    assert config.dynamic_batching.max_queue_delay_microseconds == 100


def test_fixed_shapes_cannot_batch(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.int64_scale())
    config = load("m").config
    assert config.max_batch_size == 0
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("X", DataType.TYPE_INT64, [2, 3]),
        ("OFFSET", DataType.TYPE_INT64, [2, 3]),
    ]
    assert not config.HasField("dynamic_batching")


def test_a_model_that_cannot_batch_with_max_batch_size_fails(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.int64_scale(), "max_batch_size: 2")
    with pytest.raises(NaiadError, match="model does not support batching while non-zero max_batch_size"):
        load("m")


def test_a_batch_only_tensor_becomes_dims_one_with_an_empty_reshape(repo: Path, load: Any) -> None:
    write_model(repo, "neg", onnx_models.vector_negate())
    loaded = load("neg")
    (model_input,) = loaded.config.input
    assert list(model_input.dims) == [1]
    assert model_input.HasField("reshape")
    assert list(model_input.reshape.shape) == []
    x = floats(3, 1)
    np.testing.assert_allclose(loaded.infer({"X": x}).outputs()["Y"], -x)


def test_a_scalar_output_is_dims_one_without_batching(repo: Path, load: Any) -> None:
    write_model(repo, "sum", onnx_models.scalar_sum())
    loaded = load("sum")
    assert loaded.config.max_batch_size == 0
    (output,) = loaded.config.output
    assert list(output.dims) == [1]
    assert not output.HasField("reshape")
    x = np.array([1, 2, 3.5], dtype=np.float32)
    total = loaded.infer({"X": x}).outputs()["TOTAL"]
    assert total.shape == (1,)
    np.testing.assert_allclose(total, [6.5])


def test_symbolic_and_unknown_dims_become_minus_one(repo: Path, load: Any) -> None:
    model = onnx_models.make_model(
        [helper.make_node("Identity", ["X"], ["Y"])],
        [("X", TensorProto.FLOAT, ["batch", "width", None])],
        [("Y", TensorProto.FLOAT, ["batch", "width", None])],
    )
    write_model(repo, "m", model)
    config = load("m").config
    assert list(config.input[0].dims) == [-1, -1]
    assert config.max_batch_size == 4


def test_a_partial_config_keeps_its_inputs_and_gets_the_outputs(repo: Path, load: Any) -> None:
    write_model(
        repo,
        "m",
        onnx_models.add_sub(),
        """
        max_batch_size: 2
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        """,
    )
    config = load("m").config
    assert [list(t.dims) for t in config.input] == [[4], [4]]
    assert [t.name for t in config.output] == ["OUTPUT0", "OUTPUT1"]
    assert config.max_batch_size == 2


def test_a_full_config_is_not_touched(repo: Path, load: Any) -> None:
    config_text = """
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]
        output [ { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
    """
    write_model(repo, "m", onnx_models.add_sub(), config_text)
    loaded = load("m")
    assert loaded.config.max_batch_size == 0
    assert [t.name for t in loaded.config.output] == ["OUTPUT1"]
    a, b = floats(2, 4), floats(2, 4, seed=3)
    outputs = loaded.infer({"INPUT0": a, "INPUT1": b}).outputs()
    assert set(outputs) == {"OUTPUT1"}
    np.testing.assert_allclose(outputs["OUTPUT1"], a - b)


def test_strict_mode_checks_without_completing(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.add_sub(), 'backend: "onnxruntime"\nmax_batch_size: 4')
    with pytest.raises(NaiadError) as caught:
        load("m", auto_complete=False)
    assert "configuration expects 0 inputs, model provides 2" in caught.value.message


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            'input [ { name: "IN0" data_type: TYPE_FP32 dims: [ 4 ] },'
            ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "unexpected inference input 'IN0', allowed inputs are: INPUT0, INPUT1",
        ),
        (
            'output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "unexpected inference output 'SUM', allowed outputs are: OUTPUT0, OUTPUT1",
        ),
        (
            'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },'
            ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "configuration expects datatype TYPE_INT32 for input 'INPUT0', model provides TYPE_FP32",
        ),
        (
            'output [ { name: "OUTPUT0" data_type: TYPE_FP64 dims: [ 4 ] } ]',
            "configuration expects datatype TYPE_FP64 for output 'OUTPUT0', model provides TYPE_FP32",
        ),
        (
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 5 ] },'
            ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "tensor 'INPUT0': the model expects 2 dimensions (shape [-1,4]) but the model configuration specifies 2"
            " dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor"
            " shape, making complete shape [-1,5])",
        ),
        (
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]',
            "tensor 'OUTPUT0': the model expects 2 dimensions (shape [-1,4])",
        ),
        (
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "configuration expects 1 inputs, model provides 2",
        ),
    ],
)
def test_a_config_that_contradicts_the_model_fails_to_load(repo: Path, load: Any, config: str, expected: str) -> None:
    write_model(repo, "m", onnx_models.add_sub(), "max_batch_size: 4\n" + config)
    with pytest.raises(NaiadError) as caught:
        load("m")
    assert caught.value.code == ErrorCode.INVALID_ARG
    assert expected in caught.value.message
    assert "model 'm'" in caught.value.message
    assert "(model file '1/model.onnx')" in caught.value.message


def test_batching_needs_a_variable_first_dimension(repo: Path, load: Any) -> None:
    config = """
        max_batch_size: 2
        input [ { name: "X" data_type: TYPE_INT64 dims: [ 3 ] }, { name: "OFFSET" data_type: TYPE_INT64 dims: [ 3 ] } ]
        output [ { name: "Y" data_type: TYPE_INT64 dims: [ 3 ] } ]
    """
    write_model(repo, "m", onnx_models.int64_scale(), config)
    with pytest.raises(NaiadError, match=r"the first dimension must be -1; but shape expected by the model is \[2,3\]"):
        load("m")


def test_non_tensor_outputs_are_unsupported(repo: Path, load: Any) -> None:
    write_model(repo, "m", onnx_models.sequence_output())
    with pytest.raises(NaiadError) as caught:
        load("m")
    assert caught.value.code == ErrorCode.UNSUPPORTED
    assert (
        caught.value.message == "Unsupported ONNX Type 'ONNX_TYPE_SEQUENCE' for I/O 'SEQ', expected 'ONNX_TYPE_TENSOR'."
    )


def test_int64_bool_and_string_models_match_onnxruntime(repo: Path, load: Any) -> None:
    write_model(repo, "i64", onnx_models.int64_scale())
    write_model(repo, "logic", onnx_models.bool_logic())
    write_model(repo, "text", onnx_models.string_identity())
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    offset = np.full((2, 3), -7, dtype=np.int64)
    expected = ort_reference(onnx_models.int64_scale(), {"X": x, "OFFSET": offset})
    np.testing.assert_array_equal(load("i64").infer({"X": x, "OFFSET": offset}).outputs()["Y"], expected["Y"])

    a = np.array([[True, False, True], [False, False, True]])
    b = np.array([[True, True, False], [False, True, True]])
    outputs = load("logic").infer({"A": a, "B": b}).outputs()
    np.testing.assert_array_equal(outputs["AND"], a & b)
    np.testing.assert_array_equal(outputs["NOT_A"], ~a)

    text = np.array([[b"naiad", "triton \u00e9".encode()], [b"", b"onnx"]], dtype=np.object_)
    result = load("text").infer({"TEXT": text}).outputs()["TEXT_OUT"]
    assert result.tolist() == text.tolist()


def test_string_inputs_must_be_utf8(repo: Path, load: Any) -> None:
    write_model(repo, "text", onnx_models.string_identity())
    error = error_of(load("text").infer({"TEXT": np.array([[b"ok", b"\xff\xfe"]], dtype=np.object_)}))
    assert error.code == ErrorCode.INVALID_ARG
    assert "input 'TEXT' of model 'text' holds an element that is not valid UTF-8" in error.message


def test_onnxruntime_failures_at_run_time_use_tritons_words(repo: Path, load: Any) -> None:
    config = """
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
    """
    write_model(repo, "m", onnx_models.add_sub(), config)
    error = error_of(load("m").infer({"INPUT0": floats(2, 4), "INPUT1": floats(3, 4)}))
    assert error.code == ErrorCode.INTERNAL
    assert re.match(r"onnx runtime error 1: Non-zero status code returned while running (Add|Sub) node", error.message)


def test_input_reshape_and_output_reshape_are_applied(repo: Path, load: Any) -> None:
    model = onnx_models.make_model(
        [helper.make_node("Relu", ["X"], ["Y"])],
        [("X", TensorProto.FLOAT, ["batch", 2, 3])],
        [("Y", TensorProto.FLOAT, ["batch", 2, 3])],
    )
    config = """
        max_batch_size: 4
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 2, 3 ] } } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3, 2 ] reshape: { shape: [ 2, 3 ] } } ]
    """
    write_model(repo, "m", model, config)
    x = floats(2, 6)
    y = load("m").infer({"X": x}).outputs()["Y"]
    assert y.shape == (2, 3, 2)
    np.testing.assert_allclose(y, np.maximum(x, 0).reshape(2, 3, 2))


def test_a_folder_with_external_data_and_a_custom_file_name(repo: Path, load: Any) -> None:
    weights = floats(4, 3)
    onnx_models.save_with_external_data(onnx_models.matmul(weights), repo / "mm" / "1" / "model.onnx")
    assert (repo / "mm" / "1" / "model.onnx" / "weights.bin").is_file()
    write_model(
        repo,
        "named",
        onnx_models.matmul(weights),
        'backend: "onnxruntime"\ndefault_model_filename: "net.onnx"',
        "net.onnx",
    )
    x = floats(2, 4)
    for name in ("mm", "named"):
        np.testing.assert_allclose(load(name).infer({"X": x}).outputs()["Y"], x @ weights + 1, rtol=1e-5)


def test_a_missing_model_file_names_the_path(repo: Path, load: Any) -> None:
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text('platform: "onnxruntime_onnx"')
    with pytest.raises(NaiadError) as caught:
        load("m")
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert f"unable to find '{repo / 'm' / '1' / 'model.onnx'}' for model 'm'" in caught.value.message


def test_a_corrupt_model_file_reports_onnxruntimes_error(repo: Path, load: Any) -> None:
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.onnx").write_bytes(b"this is not protobuf")
    with pytest.raises(NaiadError) as caught:
        load("m")
    assert caught.value.message.startswith("onnx runtime error 7: Load model from")
    assert "model.onnx failed:Protobuf parsing failed" in caught.value.message


def test_implicit_state_must_name_a_model_output_of_its_datatype(repo: Path, load: Any) -> None:
    config = """
        max_batch_size: 2
        input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        sequence_batching {{
          state [ {{ input_name: "STATE_IN" output_name: "{output}" data_type: {dtype} dims: [ 1 ] }} ]
        }}
    """
    write_model(repo, "good", onnx_models.accumulator(), config.format(output="STATE_OUT", dtype="TYPE_FP32"))
    write_model(repo, "no_output", onnx_models.accumulator(), config.format(output="SUM", dtype="TYPE_FP32"))
    write_model(repo, "bad_type", onnx_models.accumulator(), config.format(output="STATE_OUT", dtype="TYPE_INT32"))
    assert load("good").instances
    with pytest.raises(NaiadError, match="unexpected inference output 'SUM', allowed outputs are: OUT, STATE_OUT"):
        load("no_output")
    with pytest.raises(
        NaiadError, match="expects datatype TYPE_INT32 for output state 'STATE_OUT', model provides TYPE_FP32"
    ):
        load("bad_type")
