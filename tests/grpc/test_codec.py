"""naiad.grpc.codec on its own: versions, parameters, tensors and responses, in process."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.backend import InferenceResponse, Tensor
from naiad.config import parse_model_config
from naiad.errors import ErrorCode, NaiadError
from naiad.grpc import codec, messages
from naiad.models import ModelSignature
from naiad.protocol import grpc_service_pb2 as pb


@pytest.mark.parametrize(
    ("text", "version"), [("", ""), ("1", "1"), ("007", "7"), (" 3", "3"), ("2abc", "2"), ("+4", "4")]
)
def test_versions_are_read_like_stol(text: str, version: str) -> None:
    assert codec.parse_version(text) == version


@pytest.mark.parametrize("text", ["abc", " ", "9223372036854775808", "-1"])
def test_bad_versions(text: str) -> None:
    with pytest.raises(NaiadError) as caught:
        codec.parse_version(text)
    assert caught.value.code is ErrorCode.INVALID_ARG


def test_parameters_become_python_values() -> None:
    request = pb.ModelInferRequest()
    request.parameters["sequence_id"].string_param = "abc"
    request.parameters["sequence_start"].bool_param = True
    request.parameters["priority"].uint64_param = 2
    request.parameters["ratio"].double_param = 0.5
    request.parameters["count"].int64_param = -3
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    values, empty_final = codec.request_parameters(request.parameters)
    assert values == {"sequence_id": "abc", "sequence_start": True, "priority": 2, "ratio": 0.5, "count": -3}
    assert empty_final is True


def test_response_parameters_and_raw_outputs() -> None:
    response = InferenceResponse(
        outputs=[
            Tensor("A", "INT16", np.array([[1, -2]], dtype=np.int16)),
            Tensor("B", "BYTES", np.array([b"x", b""], dtype=np.object_)),
        ],
        parameters={"flag": True, "n": 3, "ratio": 0.25, "text": "hi"},
    )
    encoded = codec.encode_response(response, model_name="m", model_version="2", request_id="r")
    message = pb.ModelInferResponse.FromString(encoded.join())
    assert encoded.size == message.ByteSize()
    assert (message.model_name, message.model_version, message.id) == ("m", "2", "r")
    assert [(o.name, o.datatype, list(o.shape)) for o in message.outputs] == [
        ("A", "INT16", [1, 2]),
        ("B", "BYTES", [2]),
    ]
    assert list(message.raw_output_contents) == [b"\x01\x00\xfe\xff", b"\x01\x00\x00\x00x\x00\x00\x00\x00"]
    assert {key: codec.parameter_value(value) for key, value in message.parameters.items()} == {
        "flag": True,
        "n": 3,
        "ratio": 0.25,
        "text": "hi",
    }


def _signature(inputs: str) -> ModelSignature:
    return ModelSignature.from_config(parse_model_config(f"input [ {inputs} ]\noutput [ {inputs} ]", model_name="m"))


def test_typed_int8_is_truncated_to_the_low_byte() -> None:
    request = pb.ModelInferRequest(model_name="m")
    request.inputs.add(name="X", datatype="INT8", shape=[3]).contents.int_contents.extend([1, -1, 257])
    decoded = codec.decode_request(request, [], "m", _signature('{ name: "X" data_type: TYPE_INT8 dims: [ 3 ] }'))
    assert decoded.inputs[0].data.tolist() == [1, -1, 1]
    assert decoded.inputs[0].data.flags.writeable


def test_raw_inputs_are_views_until_decoded_into_writable_copies() -> None:
    request = pb.ModelInferRequest(model_name="m", id="r")
    request.inputs.add(name="X", datatype="INT16", shape=[2])
    request.inputs.add(name="Y", datatype="UINT8", shape=[3])
    request.raw_input_contents.extend([b"\x01\x00\xff\xff", b"abc"])
    data = request.SerializeToString()
    received = messages.parse_request(data)
    assert not received.message.raw_input_contents
    assert (received.message.id, [tensor.name for tensor in received.message.inputs]) == ("r", ["X", "Y"])
    assert [bytes(chunk) for chunk in received.raw] == [b"\x01\x00\xff\xff", b"abc"]
    assert all(chunk.obj is data for chunk in received.raw)  # views, not copies
    signature = _signature(
        '{ name: "X" data_type: TYPE_INT16 dims: [ 2 ] }, { name: "Y" data_type: TYPE_UINT8 dims: [ 3 ] }'
    )
    decoded = codec.decode_request(received.message, received.raw, "m", signature)
    assert [tensor.data.tolist() for tensor in decoded.inputs] == [[1, -1], [97, 98, 99]]
    assert all(tensor.data.flags.writeable for tensor in decoded.inputs)


@pytest.mark.parametrize("data", [b"\x0a\x05ab", b"\x3a\xff\xff\xff\xff\x0f", b"\x0b", b"\x80" * 11])
def test_malformed_requests_are_invalid_arg(data: bytes) -> None:
    with pytest.raises(NaiadError) as caught:
        messages.parse_request(data)
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message.startswith("the ModelInferRequest message is malformed: ")


def test_oversized_response_is_refused() -> None:
    response = InferenceResponse(outputs=[Tensor("A", "UINT8", np.zeros(100, dtype=np.uint8))])
    encoded = codec.encode_response(response, model_name="m", model_version="1", request_id="")
    with pytest.raises(NaiadError) as caught:
        codec.check_size(encoded.size, 64)
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert f"the response is {encoded.size} bytes, more than the gRPC message limit of 64 bytes" in (
        caught.value.message
    )
