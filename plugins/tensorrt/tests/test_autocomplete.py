"""Auto-complete from an engine description and the checks of a config against it, as Triton's tensorrt backend."""

from __future__ import annotations

import pytest

from naiad.backend import DataType, ErrorCode, NaiadError, config_to_json_dict
from naiad_tensorrt.autocomplete import complete_config, supported_max_batch_size
from naiad_tensorrt.checks import check_config
from naiad_tensorrt.description import EngineDescription, EngineTensor, ProfileShape

from .engines import add_sub, config, static_image, variable_length


def _io(text: str = "") -> dict[str, object]:
    completed = config(text)
    complete_config(completed, add_sub())
    return config_to_json_dict(completed)


def test_an_empty_config_is_filled_from_the_engine_with_the_batch_dimension_dropped() -> None:
    completed = config()
    complete_config(completed, add_sub())
    assert completed.max_batch_size == 16  # profile 0's maximum batch: no instance group names a profile
    assert completed.HasField("dynamic_batching")
    assert [(i.name, DataType.Name(i.data_type), list(i.dims)) for i in completed.input] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    assert [o.name for o in completed.output] == ["OUTPUT0", "OUTPUT1"]
    check_config(completed, add_sub(), "1/model.plan")


def test_max_batch_size_comes_from_the_profiles_the_instance_groups_name() -> None:
    completed = config('instance_group [ { kind: KIND_GPU profile: [ "0", "1" ] } ]')
    complete_config(completed, add_sub())
    assert completed.max_batch_size == 64  # the largest of the named profiles' maximum batch
    assert supported_max_batch_size(add_sub(), [0, 1]) == 64
    # Within a profile the smallest maximum over the inputs limits the batch.
    uneven = EngineDescription(
        add_sub().tensors,
        ({"INPUT0": ProfileShape((1, 4), (2, 4), (8, 4)), "INPUT1": ProfileShape((1, 4), (2, 4), (4, 4))},),
    )
    assert supported_max_batch_size(uneven, [0]) == 4


def test_a_configured_max_batch_size_above_the_engine_fails_autofill() -> None:
    with pytest.raises(NaiadError) as caught:
        complete_config(config("max_batch_size: 32"), add_sub())
    assert caught.value.message == (
        "autofill failed for model 'm': configuration specified max-batch 32 but TensorRT engine only supports"
        " max-batch 16"
    )


def test_configured_dims_of_full_rank_mean_no_batching() -> None:
    completed = config('input [ { name: "INPUT0" dims: [ -1, 4 ] } ]')
    complete_config(completed, add_sub())
    assert completed.max_batch_size == 0
    assert not completed.HasField("dynamic_batching")
    assert list(completed.input[0].dims) == [-1, 4]
    assert completed.input[0].data_type == DataType.TYPE_FP32  # filled in for the listed input
    assert list(completed.output[0].dims) == [-1, 4]


def test_contradicting_batch_hints_are_refused() -> None:
    text = 'input [ { name: "INPUT0" dims: [ 4 ] }, { name: "INPUT1" dims: [ -1, 4 ] } ]'
    with pytest.raises(NaiadError, match="contradicting each other in terms of whether batching is supported"):
        complete_config(config(text), add_sub())


def test_a_static_engine_batches_up_to_its_first_dimension() -> None:
    completed = config()
    complete_config(completed, static_image())
    assert completed.max_batch_size == 1
    assert not completed.HasField("dynamic_batching")  # only for max_batch_size > 1
    assert list(completed.input[0].dims) == [3, 8, 8]
    assert DataType.Name(completed.input[0].data_type) == "TYPE_FP16"
    assert DataType.Name(completed.output[0].data_type) == "TYPE_INT32"
    check_config(completed, static_image(), "1/model.plan")


def test_a_scalar_left_without_dims_gets_dims_1_and_an_empty_reshape() -> None:
    engine = EngineDescription(
        (EngineTensor("x", True, "FLOAT", (-1,)), EngineTensor("y", False, "FLOAT", (-1,))),
        ({"x": ProfileShape((1,), (2,), (4,))},),
    )
    completed = config()
    complete_config(completed, engine)
    assert completed.max_batch_size == 4
    assert list(completed.input[0].dims) == [1]
    assert completed.input[0].HasField("reshape")
    assert not completed.input[0].reshape.shape
    check_config(completed, engine, "1/model.plan")


def test_an_engine_type_without_a_triton_datatype_fails_autofill() -> None:
    engine = EngineDescription((EngineTensor("q", True, "FP8", (4,)), EngineTensor("y", False, "FLOAT", (4,))), ({},))
    with pytest.raises(NaiadError) as caught:
        complete_config(config(), engine)
    assert caught.value.code is ErrorCode.UNSUPPORTED
    assert "input 'q' has TensorRT datatype FP8, which has no Triton datatype" in caught.value.message


def test_a_config_that_disagrees_with_the_engine_names_the_tensor_and_both_shapes() -> None:
    text = """
    max_batch_size: 8
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 5 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    """
    with pytest.raises(NaiadError) as caught:
        check_config(config(text), add_sub(), "1/model.plan")
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message == (
        "unable to load model 'm': input 'INPUT0': the engine's shape is [-1,4] but the model configuration"
        " specifies [-1,5] (an initial batch dimension because max_batch_size > 0, followed by the configured"
        " dims); make dims match the engine (-1 where the engine's dimension is dynamic) (model file '1/model.plan')"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'max_batch_size: 8 input [ { name: "SUMMAND" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "unexpected inference input 'SUMMAND', allowed inputs are: INPUT0, INPUT1",
        ),
        (
            'max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ 4 ] } ]',
            "configuration expects datatype TYPE_FP16 for input 'INPUT0', model provides TYPE_FP32",
        ),
        (
            'max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "the engine's input 'INPUT1' is not in the configuration; add it to 'input'",
        ),
        (
            "max_batch_size: 100",
            "configuration specified max_batch_size 100 but the TensorRT engine's optimization profile(s) [0, 1]"
            " only support a batch of 64",
        ),
    ],
)
def test_config_checks(text: str, expected: str) -> None:
    with pytest.raises(NaiadError) as caught:
        check_config(config(text), add_sub(), "1/model.plan")
    assert expected in caught.value.message
    assert caught.value.message.endswith("(model file '1/model.plan')")


def test_a_fixed_configured_dimension_must_fit_every_used_profile() -> None:
    text = """
    max_batch_size: 8
    input [ { name: "tokens" data_type: TYPE_INT64 dims: [ 256 ] } ]
    output [ { name: "hidden" data_type: TYPE_FP32 dims: [ -1, 16 ] } ]
    """
    with pytest.raises(NaiadError) as caught:
        check_config(config(text), variable_length(), "1/model.plan")
    assert (
        "input 'tokens': configuration shape [-1,256] is outside every optimization profile the instances use"
        " (profile 0: [1,1] to [8,128])" in caught.value.message
    )
    check_config(config(text.replace("256", "-1")), variable_length(), "1/model.plan")


def test_batching_needs_a_dynamic_first_dimension() -> None:
    engine = EngineDescription(
        (EngineTensor("x", True, "FLOAT", (2, 4)), EngineTensor("y", False, "FLOAT", (2, 4))), ({},)
    )
    text = 'max_batch_size: 1 input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]'
    with pytest.raises(NaiadError, match=r"the engine has \[2,4\]; set max_batch_size: 0"):
        check_config(config(text), engine, "1/model.plan")


def test_unservable_engines_are_refused_with_the_reason() -> None:
    implicit = EngineDescription(add_sub().tensors, add_sub().profiles, implicit_batch=True)
    with pytest.raises(NaiadError, match="implicit batch dimension, which TensorRT 10 no longer runs; rebuild"):
        check_config(config(), implicit, "1/model.plan")
    shape_tensor = EngineDescription((EngineTensor("s", True, "INT32", (2,), is_shape_tensor=True),), ({},))
    with pytest.raises(NaiadError, match="engine tensor 's' is a shape tensor"):
        check_config(config(), shape_tensor, "1/model.plan")


def test_completion_keeps_what_the_config_says() -> None:
    completed = _io("max_batch_size: 4 dynamic_batching { max_queue_delay_microseconds: 100 }")
    assert completed["max_batch_size"] == 4
    assert completed["dynamic_batching"]["max_queue_delay_microseconds"] == 100  # type: ignore[index]
