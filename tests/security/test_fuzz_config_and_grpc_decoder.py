"""Property-based fuzzing of the config parser and the gRPC request decoder.

Whatever the bytes, the answer is a result or a :class:`NaiadError` (Triton's error format with a
status), never another exception, which the frontends would turn into a 500. A bounded, derandomized
number of examples runs in CI.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from naiad.config import config_from_json, fill_defaults, parse_model_config, validate_config
from naiad.errors import NaiadError
from naiad.grpc import codec
from naiad.grpc.messages import parse_request
from naiad.models import ModelSignature
from naiad.protocol import grpc_service_pb2 as pb
from naiad.validation import validate_inputs

FUZZ = settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)

# -- config.pbtxt and JSON configs ------------------------------------------------------------

_WORDS = st.sampled_from(
    [
        "name",
        "backend",
        "platform",
        "max_batch_size",
        "input",
        "output",
        "dims",
        "data_type",
        "TYPE_FP32",
        "TYPE_STRING",
        "instance_group",
        "count",
        "kind",
        "KIND_GPU",
        "dynamic_batching",
        "sequence_batching",
        "ensemble_scheduling",
        "step",
        "reshape",
        "shape",
        "parameters",
        "key",
        "value",
        "string_value",
        "default_model_filename",
        "version_policy",
        "specific",
        "versions",
        "label_filename",
        "optional",
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        '"',
        "-1",
        "0",
        "1",
        "8",
        "99999999999999999999",
        "1e9",
        "true",
        "python",
        "identity",
        "../x",
        "\\",
        "\n",
        " ",
    ]
)


@FUZZ
@given(st.lists(_WORDS, max_size=40).map(" ".join) | st.text(max_size=200))
def test_any_config_text_parses_or_is_refused(text: str) -> None:
    try:
        config = parse_model_config(text, model_name="m")
    except NaiadError:
        return
    _complete_or_refuse(config)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_WORDS | st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@FUZZ
@given(st.dictionaries(_WORDS, _JSON_VALUES, max_size=6))
def test_any_json_config_parses_or_is_refused(document: dict[str, Any]) -> None:
    try:
        config = config_from_json(json.dumps(document))
    except NaiadError:
        return
    _complete_or_refuse(config)


def _complete_or_refuse(config: Any) -> None:
    config.name = config.name or "m"
    try:
        fill_defaults(config, gpu_count=1)
        validate_config(config, gpu_count=1)
    except NaiadError:
        return


# -- ModelInferRequest bytes and messages ------------------------------------------------------

SIGNATURE = ModelSignature.from_config(
    parse_model_config(
        """
        max_batch_size: 4
        input [ { name: "A" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "B" data_type: TYPE_STRING dims: [ 2 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
        """,
        model_name="m",
    )
)


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes_as_a_request_parse_or_are_refused(data: bytes) -> None:
    try:
        message = parse_request(data)
        decoded = codec.decode_request(message.message, message.raw, "m", SIGNATURE)
        validate_inputs("m", SIGNATURE, decoded.inputs, decoded.id)
    except NaiadError:
        return


_DATATYPES = st.sampled_from(["FP32", "BYTES", "INT64", "BOOL", "FP16", "BF16", "UINT8", "NOPE", ""])
_EDGE_DIMS = st.sampled_from([0, 2**32, 2**61, 2**62, 2**63 - 1])  # overflow, or too large next to a 0
_DIMS = st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-2, 5) | _EDGE_DIMS, max_size=70)


@st.composite
def _messages(draw: st.DrawFn) -> tuple[pb.ModelInferRequest, list[bytes]]:
    message = pb.ModelInferRequest(model_name="m", id=draw(st.text(max_size=5)))
    raw: list[bytes] = []
    use_raw = draw(st.booleans())
    for _ in range(draw(st.integers(0, 3))):
        tensor = message.inputs.add(name=draw(st.sampled_from(["A", "B", "C", ""])), datatype=draw(_DATATYPES))
        tensor.shape.extend(draw(_DIMS))
        if use_raw:
            raw.append(draw(st.binary(max_size=64)))
        else:
            contents = tensor.contents
            contents.fp32_contents.extend(draw(st.lists(st.floats(width=32), max_size=8)))
            contents.bytes_contents.extend(draw(st.lists(st.binary(max_size=8), max_size=4)))
            contents.int64_contents.extend(draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4)))
    for name in draw(st.lists(st.sampled_from(["Y", "Z", ""]), max_size=3)):
        output = message.outputs.add(name=name)
        if draw(st.booleans()):
            output.parameters["classification"].int64_param = draw(st.integers(-3, 3))
    for key in draw(
        st.lists(st.sampled_from(["sequence_id", "priority", "timeout", "triton_x", "custom"]), max_size=3)
    ):
        parameter = message.parameters[key]
        choice = draw(st.integers(0, 3))
        if choice == 0:
            parameter.int64_param = draw(st.integers(-(2**63), 2**63 - 1))
        elif choice == 1:
            parameter.string_param = draw(st.text(max_size=5))
        elif choice == 2:
            parameter.bool_param = draw(st.booleans())
        else:
            parameter.uint64_param = draw(st.integers(0, 2**64 - 1))
    return message, raw


def _one_input(shape: list[int], data: bytes) -> tuple[pb.ModelInferRequest, list[bytes]]:
    message = pb.ModelInferRequest(model_name="m")
    message.inputs.add(name="A", datatype="FP32", shape=shape)
    return message, [data]


@FUZZ
@given(_messages())
@example(_one_input([2**62, 0], b""))  # numpy cannot build it although it holds nothing
@example(_one_input([1] * 70, b"\0" * 4))  # more dimensions than numpy allows
@example(_one_input([2**32, 2**32], b""))  # the element count overflows int64
def test_any_infer_message_decodes_or_is_refused(drawn: tuple[pb.ModelInferRequest, list[bytes]]) -> None:
    message, raw = drawn
    try:
        decoded = codec.decode_request(message, raw, "m", SIGNATURE)
        validate_inputs("m", SIGNATURE, decoded.inputs, decoded.id)
    except NaiadError:
        return
