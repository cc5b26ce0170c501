"""The ``triton_python_backend_utils`` module on its own: constants, helpers and classes."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils

EXPECTED_NAMES = {
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "Logger",
    "MemoryType",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_model_dir",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "json",
    "load_model",
    "np",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "struct",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
}


def test_exported_names() -> None:
    assert set(pb_utils.__all__) == EXPECTED_NAMES
    for name in EXPECTED_NAMES:
        assert hasattr(pb_utils, name), name


def test_the_modules_tritons_module_imports_are_reachable_through_it() -> None:
    """Models written for Triton reach numpy as ``pb_utils.np`` (and json, struct) without importing them."""
    assert pb_utils.np is np
    assert pb_utils.json is json
    assert pb_utils.struct.pack("<I", 1) == b"\x01\x00\x00\x00"


def test_constants() -> None:
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START == 1
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2
    assert pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE == 2
    assert int(pb_utils.TRITONSERVER_MEMORY_GPU) == 0
    assert int(pb_utils.TRITONSERVER_MEMORY_CPU) == 1
    assert pb_utils.TRITON_STRING_TO_NUMPY["TYPE_BOOL"] is bool
    assert pb_utils.TRITON_STRING_TO_NUMPY["TYPE_STRING"] is np.object_
    assert "TYPE_BF16" not in pb_utils.TRITON_STRING_TO_NUMPY


def test_type_conversions() -> None:
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    with pytest.raises(KeyError):
        pb_utils.triton_string_to_numpy("TYPE_BF16")
    assert [pb_utils.triton_to_numpy_type(i) for i in (1, 11, 13, 14, 0)] == [
        np.bool_,
        np.float32,
        np.object_,
        None,
        None,
    ]
    for number in range(1, 14):
        numpy_type = pb_utils.triton_to_numpy_type(number)
        assert pb_utils.numpy_to_triton_type(numpy_type) == number
        assert pb_utils.numpy_to_triton_type(np.dtype(numpy_type)) == number
    assert pb_utils.numpy_to_triton_type(np.bytes_) == 13
    assert pb_utils.numpy_to_triton_type(np.str_) is None


def test_serialize_and_deserialize_bytes() -> None:
    array = np.array([[b"ab", "c"], [3, b""]], dtype=np.object_)
    encoded = pb_utils.serialize_byte_tensor(array)
    assert encoded == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c\x01\x00\x00\x003\x00\x00\x00\x00"
    decoded = pb_utils.deserialize_bytes_tensor(encoded)
    assert decoded.dtype == np.object_
    assert decoded.tolist() == [b"ab", b"c", b"3", b""]
    assert pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)) == ()
    assert pb_utils.serialize_byte_tensor(np.array([1.0])) is None
    assert pb_utils.serialize_byte_tensor(np.array([b"xy"], dtype=np.bytes_)) == b"\x02\x00\x00\x00xy"


def test_config_lookups() -> None:
    config: dict[str, Any] = {
        "input": [{"name": "A", "data_type": "TYPE_FP32"}],
        "output": [{"name": "B", "data_type": "TYPE_INT8"}],
        "model_transaction_policy": {"decoupled": True},
    }
    assert pb_utils.get_input_config_by_name(config, "A") == {"name": "A", "data_type": "TYPE_FP32"}
    assert pb_utils.get_input_config_by_name(config, "B") is None
    assert pb_utils.get_output_config_by_name(config, "B") == {"name": "B", "data_type": "TYPE_INT8"}
    assert pb_utils.get_output_config_by_name({}, "B") is None
    assert pb_utils.using_decoupled_model_transaction_policy(config) is True
    assert pb_utils.using_decoupled_model_transaction_policy({}) is False


def test_tensor_basics() -> None:
    data = np.arange(6, dtype=np.int16).reshape(2, 3)
    tensor = pb_utils.Tensor("T", data)
    assert tensor.name() == "T"
    assert tensor.triton_dtype() == 7
    assert tensor.shape() == [2, 3]
    assert tensor.is_cpu()
    assert tensor.as_numpy() is data
    transposed = pb_utils.Tensor("T", data.T)
    assert transposed.as_numpy().flags.c_contiguous
    np.testing.assert_array_equal(transposed.as_numpy(), data.T)
    assert pb_utils.Tensor("L", [1.5, 2.5]).triton_dtype() == 12
    assert pb_utils.Tensor("B", np.array([True])).triton_dtype() == 1
    assert pb_utils.Tensor("S", np.array([b"x"], dtype=np.bytes_)).triton_dtype() == 13


def test_tensor_rejections() -> None:
    with pytest.raises(pb_utils.TritonModelException, match=r"Tensor name cannot be an empty string\."):
        pb_utils.Tensor("", np.zeros(1))
    with pytest.raises(pb_utils.TritonModelException, match="NumPy dtype is not supported"):
        pb_utils.Tensor("U", np.array(["text"]))
    with pytest.raises(pb_utils.TritonModelException, match="NumPy dtype is not supported"):
        pb_utils.Tensor("C", np.zeros(2, dtype=np.complex64))


def test_text_arguments_take_bytes_and_refuse_other_types_as_triton_does() -> None:
    assert pb_utils.Tensor(b"OUT", np.zeros(1)).name() == "OUT"
    assert type(pb_utils.Tensor(np.str_("OUT"), np.zeros(1)).name()) is str
    request = pb_utils.InferenceRequest(
        model_name=np.bytes_(b"other"), inputs=[], requested_output_names=(b"A", "B"), request_id=b"id"
    )
    assert (request.request_id(), request.requested_output_names()) == ("id", {"A", "B"})
    assert pb_utils.TritonError(b"said").message() == "said"
    refusals: list[Any] = [
        lambda: pb_utils.Tensor(5, np.zeros(1)),
        lambda: pb_utils.TritonError(5),
        lambda: pb_utils.InferenceRequest(model_name=5, inputs=[], requested_output_names=[]),
        lambda: pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names="OUT"),
        lambda: pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[1]),
        lambda: pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], request_id=5),
        lambda: pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], model_version="1"),
        lambda: pb_utils.Logger.log_info(5),
        lambda: pb_utils.is_model_ready("m", 1),
        lambda: pb_utils.load_model(None),
        lambda: pb_utils.load_model("m", config=None),
    ]
    for refused in refusals:
        with pytest.raises(TypeError, match="must be"):
            refused()


def test_argument_checks_raise_what_tritons_raise() -> None:
    """The exception types of Triton's own argument_validation test model."""
    none_checks: list[tuple[type[Exception], Any]] = [
        (
            pb_utils.TritonModelException,
            lambda: pb_utils.InferenceRequest(model_name="m", inputs=[None], requested_output_names=[]),
        ),
        (pb_utils.TritonModelException, lambda: pb_utils.InferenceResponse(output_tensors=[None])),
        (TypeError, lambda: pb_utils.InferenceResponse(output_tensors=None)),
        (
            TypeError,
            lambda: pb_utils.InferenceRequest(
                model_name="m", inputs=[], requested_output_names=[], correlation_id=None
            ),
        ),
        (TypeError, lambda: pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[None])),
        (TypeError, lambda: pb_utils.Tensor("OUTPUT0", None)),
        (TypeError, lambda: pb_utils.Tensor("", None)),
        (TypeError, lambda: pb_utils.Logger.log("Invalid Level", 1)),
        (TypeError, lambda: pb_utils.Logger.log("Invalid Level", None)),
    ]
    for raised, call in none_checks:
        with pytest.raises(raised):
            call()
    pb_utils.Logger.log("Level unspecified")
    assert pb_utils.InferenceResponse().output_tensors() == []


def test_bytes_tensor_is_captured_at_construction() -> None:
    data = np.array([b"a", "b"], dtype=np.object_)
    tensor = pb_utils.Tensor("T", data)
    data[0] = b"changed"
    assert tensor._wire_array().tolist() == [b"a", b"b"]
    assert tensor.as_numpy() is data


def test_dlpack_round_trip() -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = pb_utils.Tensor("T", data)
    assert tensor.__dlpack_device__() == (1, 0)
    from_capsule = pb_utils.Tensor.from_dlpack("C", tensor.to_dlpack())
    from_object = pb_utils.Tensor.from_dlpack("O", tensor)
    for imported in (from_capsule, from_object):
        assert imported.triton_dtype() == 11
        np.testing.assert_array_equal(imported.as_numpy(), data)
    assert np.shares_memory(from_capsule.as_numpy(), data)  # zero-copy
    np.testing.assert_array_equal(np.from_dlpack(tensor), data)
    from_numpy = pb_utils.Tensor.from_dlpack("N", data)
    assert from_numpy.shape() == [2, 3]


def test_dlpack_rejections() -> None:
    with pytest.raises(pb_utils.TritonModelException, match="DLPack does not have support for string tensors"):
        pb_utils.Tensor("S", np.array([b"x"], dtype=np.object_)).to_dlpack()
    with pytest.raises(pb_utils.TritonModelException, match="not contiguous"):
        pb_utils.Tensor.from_dlpack("T", np.arange(6, dtype=np.float32).reshape(2, 3).T)
    with pytest.raises(pb_utils.TritonModelException, match="must be a DLPack capsule"):
        pb_utils.Tensor.from_dlpack("T", [1, 2])
    capsule = pb_utils.Tensor("T", np.zeros(2, np.float32)).to_dlpack()
    pb_utils.Tensor.from_dlpack("T", capsule)
    with pytest.raises(pb_utils.TritonModelException, match="already consumed"):
        pb_utils.Tensor.from_dlpack("T", capsule)


def test_bf16_through_dlpack() -> None:
    import ml_dtypes

    values = np.array([1.0, -2.5, 3.0], dtype=ml_dtypes.bfloat16)
    bits = values.view(np.uint16)

    from naiad_python.pbutils.tensor import Tensor

    tensor = Tensor._wrap("BF", bits.copy(), 14)
    assert tensor.triton_dtype() == 14
    with pytest.raises(pb_utils.TritonModelException) as refused:
        tensor.as_numpy()
    assert str(refused.value) == (  # Triton's words, which its own BF16 test looks for
        "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead."
    )
    imported = pb_utils.Tensor.from_dlpack("BF", tensor.to_dlpack())  # exported with the kDLBfloat code
    assert imported.triton_dtype() == 14
    np.testing.assert_array_equal(imported._wire_array(), bits)
    # numpy refuses a BF16 capsule, which shows the exported dtype code really is kDLBfloat
    with pytest.raises((BufferError, TypeError, ValueError, RuntimeError)):
        np.from_dlpack(tensor)


def test_triton_error() -> None:
    error = pb_utils.TritonError("bad", pb_utils.TritonError.INVALID_ARG)
    assert (error.message(), error.code()) == ("bad", pb_utils.TritonError.INVALID_ARG)
    assert pb_utils.TritonError("x").code() == pb_utils.TritonError.INTERNAL
    codes = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED"]
    codes += ["ALREADY_EXISTS", "CANCELLED"]
    assert [int(getattr(pb_utils.TritonError, name)) for name in codes] == list(range(8))
    with pytest.raises(TypeError):
        pb_utils.TritonError("x", 99)


def test_inference_response() -> None:
    tensor = pb_utils.Tensor("OUT", np.zeros(1))
    response = pb_utils.InferenceResponse(output_tensors=[tensor], parameters={"a": 1, "b": "x", "c": True})
    assert response.output_tensors() == [tensor]
    assert not response.has_error()
    assert response.error() is None
    assert json.loads(response.parameters()) == {"a": 1, "b": "x", "c": True}
    assert pb_utils.get_output_tensor_by_name(response, "OUT") is tensor
    assert pb_utils.get_output_tensor_by_name(response, "NOPE") is None
    assert pb_utils.InferenceResponse().output_tensors() == []
    errored = pb_utils.InferenceResponse(error=pb_utils.TritonError("e"))
    assert errored.has_error()
    with pytest.raises(
        pb_utils.TritonModelException,
        match="Expect parameters values to have type bool/int/str, found type <class 'float'>",
    ):
        pb_utils.InferenceResponse(parameters={"f": 0.5})
    with pytest.raises(pb_utils.TritonModelException, match="Expect parameters keys to have type str"):
        pb_utils.InferenceResponse(parameters={1: "x"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        pb_utils.InferenceResponse(output_tensors=[np.zeros(1)])  # type: ignore[list-item]


def test_bls_request_construction_and_exec_outside_a_model() -> None:
    tensor = pb_utils.Tensor("IN", np.zeros(1))
    request = pb_utils.InferenceRequest(
        model_name="other",
        inputs=[tensor],
        requested_output_names=["OUT"],
        correlation_id="seq-1",
        flags=pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
        parameters={"k": 1},
    )
    assert request.inputs() == [tensor]
    assert request.correlation_id() == "seq-1"
    assert request.flags() == 1
    request.set_flags(3)
    assert request.flags() == 3
    assert json.loads(request.parameters()) == {"k": 1}
    assert pb_utils.get_input_tensor_by_name(request, "IN") is tensor
    assert request.trace().get_context() is None
    with pytest.raises(TypeError, match="'model_name' argument is required"):
        pb_utils.InferenceRequest(inputs=[], requested_output_names=[])
    with pytest.raises(TypeError, match=r"inputs must be a list of pb_utils\.Tensor"):
        pb_utils.InferenceRequest(model_name="other", inputs=[np.zeros(1)], requested_output_names=[])  # type: ignore[list-item]
    with pytest.raises(pb_utils.TritonModelException, match=r"only works when called from a model's code"):
        request.exec()
    with pytest.raises(RuntimeError, match="no running event loop"):
        request.async_exec(decoupled=True)
    with pytest.raises(pb_utils.TritonModelException, match="response sender"):
        request.get_response_sender()


@pytest.mark.parametrize(
    ("api", "call"),
    [
        ("pb_utils.load_model()", lambda: pb_utils.load_model("m")),
        ("pb_utils.unload_model()", lambda: pb_utils.unload_model("m")),
        ("pb_utils.is_model_ready()", lambda: pb_utils.is_model_ready("m")),
        ("pb_utils.MetricFamily", lambda: pb_utils.MetricFamily("n", "d", pb_utils.MetricFamily.COUNTER)),
    ],
)
def test_server_apis_act_for_the_calling_model(api: str, call: Any) -> None:
    with pytest.raises(pb_utils.TritonModelException, match=re.escape(f"{api} only works when called from a model's")):
        call()


def test_metric_kinds() -> None:
    kinds = (pb_utils.MetricFamily.COUNTER, pb_utils.MetricFamily.GAUGE, pb_utils.MetricFamily.HISTOGRAM)
    assert kinds == (0, 1, 2)


def test_decoupled_sender_rules() -> None:
    from naiad_python.pbutils.response import InferenceResponseSender

    delivered: list[tuple[object, bool]] = []
    sender = InferenceResponseSender(
        lambda response, final: delivered.append((response, final)), decoupled=True, is_cancelled=lambda: True
    )
    response = pb_utils.InferenceResponse()
    sender.send(response)
    sender.send(response)
    with pytest.raises(pb_utils.TritonModelException, match="Unsupported flag provided"):
        sender.send(response, flags=4)
    with pytest.raises(pb_utils.TritonModelException, match="must be provided when the response flags is set to zero"):
        sender.send()
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    with pytest.raises(pb_utils.TritonModelException, match=r"Response sender has been closed\."):
        sender.send(response)
    assert delivered == [(response, False), (response, False), (None, True)]
    assert sender.is_cancelled()


def test_logger_maps_to_python_logging(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="naiad.python.model"):
        pb_utils.Logger.log_info("info message")
        pb_utils.Logger.log_warn("warn message")
        pb_utils.Logger.log_error("error message")
        pb_utils.Logger.log_verbose("verbose message")
        pb_utils.Logger.log("default level")
        pb_utils.Logger.log("as error", pb_utils.Logger.LogLevel.ERROR)
    records = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        ("naiad.python.model", logging.INFO, "info message"),
        ("naiad.python.model", logging.WARNING, "warn message"),
        ("naiad.python.model", logging.ERROR, "error message"),
        ("naiad.python.model", logging.DEBUG, "verbose message"),
        ("naiad.python.model", logging.INFO, "default level"),
        ("naiad.python.model", logging.ERROR, "as error"),
    ]
    assert all(r.filename == "test_pb_utils.py" for r in caplog.records)
    assert pb_utils.Logger.VERBOSE == pb_utils.Logger.LogLevel.VERBOSE


def _config(**extra: Any) -> pb_utils.ModelConfig:
    base: dict[str, Any] = {"name": "m", "max_batch_size": 0, "input": [], "output": []}
    base.update(extra)
    return pb_utils.ModelConfig(json.dumps(base))


def test_model_config_helper() -> None:
    config = _config(input=[{"name": "A", "data_type": "TYPE_INVALID", "dims": []}])
    config.set_max_batch_size(4)
    config.set_dynamic_batching()
    config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [2], "optional": True})
    config.add_input({"name": "B", "data_type": "TYPE_INT8", "dims": [-1]})
    config.add_output({"name": "C", "data_type": "TYPE_STRING", "dims": [1]})
    config.set_model_transaction_policy({"decoupled": True})
    config.set_model_transaction_policy({"decoupled": True})
    assert config.as_dict() == {
        "name": "m",
        "max_batch_size": 4,
        "dynamic_batching": {},
        "input": [
            {"name": "A", "data_type": "TYPE_FP32", "dims": [2], "optional": True},
            {"name": "B", "data_type": "TYPE_INT8", "dims": [-1]},
        ],
        "output": [{"name": "C", "data_type": "TYPE_STRING", "dims": [1]}],
        "model_transaction_policy": {"decoupled": True},
    }


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda c: c.set_max_batch_size(1), "configuration specified max_batch_size 8"),
        (lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32"}), "is missing 'dims' property."),
        (lambda c: c.add_input({"data_type": "TYPE_FP32", "dims": [1]}), "is missing 'name' property."),
        (
            lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "format": "x"}),
            "contains property other than 'name', 'data_type', 'dims' and 'optional'.",
        ),
        (
            lambda c: c.add_output({"name": "O", "data_type": "TYPE_FP32", "dims": [1], "optional": True}),
            "contains property other than 'name', 'data_type' and 'dims'.",
        ),
        (
            lambda c: c.add_input({"name": "I", "data_type": "TYPE_INT32", "dims": [3]}),
            "configuration expects datatype TYPE_FP32 for input 'I', model provides TYPE_INT32",
        ),
        (
            lambda c: c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [4]}),
            "the model expects dims [4] but the model configuration specifies dims [3]",
        ),
        (
            lambda c: c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [3], "optional": True}),
            "the model expects optional True but the model configuration specifies optional False",
        ),
        (lambda c: c.set_dynamic_batching(), "tries to set scheduling_choice as 'dynamic_batching'"),
        (lambda c: c.set_model_transaction_policy({"decoupled": True}), "which is already set to 'False'."),
        (lambda c: c.set_model_transaction_policy({"other": 1}), "contains property other than 'decoupled'."),
    ],
)
def test_model_config_helper_rejections(action: Any, message: str) -> None:
    config = _config(
        max_batch_size=8,
        input=[{"name": "I", "data_type": "TYPE_FP32", "dims": [3], "optional": False}],
        sequence_batching={},
        model_transaction_policy={"decoupled": False},
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        action(config)
