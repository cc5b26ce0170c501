"""ModelInferRequest and ModelInferResponse on the wire, without protobuf copies of tensor bytes.

grpcio hands a handler the received message as one ``bytes`` object. Parsing all of it with
protobuf would copy every ``raw_input_contents`` entry twice (into protobuf's arena, then into a
new ``bytes`` on each access). Instead the top-level fields are walked here: the raw contents
become views of the received bytes and only the rest (names, shapes, parameters: small) goes
through protobuf. Responses are built the other way round: protobuf serializes everything but
``raw_output_contents``, and the output tensors' bytes are appended to it in one join.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from naiad.errors import invalid_arg
from naiad.protocol import grpc_service_pb2 as pb

Buffer = bytes | bytearray | memoryview

_RAW_INPUT_CONTENTS = 7  # ModelInferRequest.raw_input_contents
_RAW_OUTPUT_CONTENTS = 6  # ModelInferResponse.raw_output_contents
_INFER_RESPONSE = 2  # ModelStreamInferResponse.infer_response
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


@dataclass(slots=True)
class InferRequestMessage:
    """A received ModelInferRequest: every field but the raw contents, which stay views of the
    received bytes (they keep those bytes alive: drop them once the tensors are decoded)."""

    message: pb.ModelInferRequest
    raw: list[memoryview]


@dataclass(slots=True)
class Encoded:
    """A serialized message as the pieces to join (tensor bytes are not copied until then)."""

    pieces: list[Buffer]
    size: int

    def join(self) -> bytes:
        return b"".join(self.pieces)


def parse_request(data: bytes) -> InferRequestMessage:
    """Split a serialized ModelInferRequest into its small fields (parsed) and raw contents (views)."""
    view = memoryview(data)
    end = len(data)
    kept: list[memoryview] = []  # the byte ranges of every other field, in order
    raw: list[memoryview] = []
    position = kept_from = 0
    while position < end:
        field_start = position
        key, position = _read_varint(data, position)
        wire_type = key & 7
        if wire_type == _LENGTH_DELIMITED:
            length, position = _read_varint(data, position)
            if position + length > end:
                raise _malformed("a field runs past the end of the message")
            if key >> 3 == _RAW_INPUT_CONTENTS:
                kept.append(view[kept_from:field_start])
                raw.append(view[position : position + length])
                kept_from = position + length
            position += length
        elif wire_type == _VARINT:
            _, position = _read_varint(data, position)
        elif wire_type in (_FIXED64, _FIXED32):
            position += 8 if wire_type == _FIXED64 else 4
        else:
            raise _malformed(f"unexpected wire type {wire_type}")
    if position > end:
        raise _malformed("a field runs past the end of the message")
    kept.append(view[kept_from:end])
    try:
        message = pb.ModelInferRequest.FromString(b"".join(kept))
    except DecodeError as error:
        raise _malformed(str(error)) from None
    return InferRequestMessage(message, raw)


def infer_response(head: pb.ModelInferResponse, raw: Sequence[Buffer]) -> Encoded:
    """A ModelInferResponse: ``head`` (no raw contents) followed by one raw output per buffer."""
    serialized = head.SerializeToString()
    pieces: list[Buffer] = [serialized]
    size = len(serialized)
    for chunk in raw:
        length = len(chunk)
        prefix = _RAW_OUTPUT_KEY + _varint(length)
        pieces.append(prefix)
        pieces.append(chunk)
        size += len(prefix) + length
    return Encoded(pieces, size)


def stream_response(response: Encoded, error_message: str) -> Encoded:
    """A ModelStreamInferResponse carrying ``response`` and, if not empty, ``error_message``."""
    prefix = _INFER_RESPONSE_KEY + _varint(response.size)
    if error_message:
        prefix = pb.ModelStreamInferResponse(error_message=error_message).SerializeToString() + prefix
    return Encoded([prefix, *response.pieces], len(prefix) + response.size)


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE_VARINTS = [bytes((value,)) for value in range(0x80)]
_RAW_OUTPUT_KEY = _varint(_RAW_OUTPUT_CONTENTS << 3 | _LENGTH_DELIMITED)
_INFER_RESPONSE_KEY = _varint(_INFER_RESPONSE << 3 | _LENGTH_DELIMITED)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    end = len(data)
    while position < end and shift < 64:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
    raise _malformed("a varint is truncated or longer than 10 bytes")


def _malformed(what: str) -> Exception:
    return invalid_arg(f"the ModelInferRequest message is malformed: {what}")
