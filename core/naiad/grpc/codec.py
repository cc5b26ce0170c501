"""``ModelInferRequest`` / ``ModelInferResponse`` to and from naiad's tensors and responses.

Inputs arrive as typed ``contents`` or as ``raw_input_contents`` (one entry per input, in
order; views of the received message, see :mod:`naiad.grpc.messages`); typed contents are
re-encoded as raw bytes so both go through :func:`naiad.wire.from_bytes` and get the same checks
and messages. Each input is copied once, into a writable buffer. Outputs always go back in
``raw_output_contents``, one entry per output, as Triton does, serialized straight from the
tensors. Request validation (shapes, datatypes, the ``triton_*`` rule, scheduling parameters)
belongs to the data plane.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from naiad import datatypes
from naiad.errors import ByteSizeMismatch, NaiadError, invalid_arg, request_prefix
from naiad.grpc import messages
from naiad.grpc.messages import Buffer, Encoded
from naiad.grpc.status import cut_details
from naiad.inference import InferenceResponse, ParameterValue, RequestedOutput
from naiad.models import ModelSignature
from naiad.protocol import grpc_service_pb2 as pb
from naiad.shared_memory import (
    RegionDestination,
    RegionReference,
    SharedMemoryRegistry,
    Window,
    input_tensor,
    window_of,
)
from naiad.tensor import Tensor
from naiad.validation import (
    first_in_triton_order,
    input_already_exists,
    validate_inputs,
    validate_outputs,
)
from naiad.wire import from_bytes, wire_array

EMPTY_FINAL_KEY = "triton_enable_empty_final_response"
FINAL_KEY = "triton_final_response"

# The typed-contents field of each datatype (FP16 and BF16 have none), and the dtype its
# values arrive in; narrower integers travel in 32-bit fields and are truncated.
_CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
# Each typed-contents field: the datatype Triton names it by, and the dtype of its values.
_FIELDS: dict[str, tuple[str, Any]] = {
    "bool_contents": ("BOOL", np.bool_),
    "int_contents": ("INT32", np.int32),
    "int64_contents": ("INT64", np.int64),
    "uint_contents": ("UINT32", np.uint32),
    "uint64_contents": ("UINT64", np.uint64),
    "fp32_contents": ("FP32", np.float32),
    "fp64_contents": ("FP64", np.float64),
    "bytes_contents": ("BYTES", np.object_),
}

# Request parameters whose InferParameter type Triton checks, and the accepted types.
_TYPED_PARAMETERS = {
    "sequence_id": ("int64_param", "string_param"),
    "sequence_start": ("bool_param",),
    "sequence_end": ("bool_param",),
    "priority": ("int64_param", "uint64_param"),
    "timeout": ("int64_param",),
    EMPTY_FINAL_KEY: ("bool_param",),
}
_CUSTOM_TYPES = ("bool_param", "int64_param", "string_param", "double_param")

_VERSION_RE = re.compile(r"\s*([+-]?\d+)")


@dataclass(slots=True)
class DecodedRequest:
    """A ModelInferRequest decoded into tensors and plain parameters, not yet validated."""

    id: str
    inputs: list[Tensor]
    outputs: list[RequestedOutput]
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    enable_empty_final: bool = False
    in_shared_memory: frozenset[str] = frozenset()  # outputs written to shared memory: no data in responses
    input_windows: tuple[Window, ...] = ()  # keep their regions in use until the request is answered


def parse_version(text: str) -> str:
    """A request's version string as the data plane's lookup takes it ('' = server choice).

    Follows Triton, which reads a leading integer (``std::stol``): "abc", an overflow or a
    negative number is INVALID_ARG.
    """
    if not text:
        return ""
    match = _VERSION_RE.match(text)
    if match is None or not -(2**63) <= int(match.group(1)) < 2**63:
        raise invalid_arg(
            f"failed to get model version from specified version string '{text}' (details: stol), "
            "version should be an integral value > 0"
        )
    version = int(match.group(1))
    if version < 0:
        raise invalid_arg(f"invalid model version specified '{text}' , version should be an integral value > 0")
    return str(version)


# -- parameters -------------------------------------------------------------------------------


def parameter_value(parameter: pb.InferParameter) -> ParameterValue | None:
    """The Python value of an InferParameter (None when no member of the oneof is set)."""
    kind = parameter.WhichOneof("parameter_choice")
    if kind is None:
        return None
    value: ParameterValue = getattr(parameter, kind)
    return value


def set_parameter(parameter: pb.InferParameter, value: ParameterValue) -> None:
    """Store a Python value in the InferParameter member of its type."""
    if isinstance(value, bool):
        parameter.bool_param = value
    elif isinstance(value, int):
        parameter.int64_param = value
    elif isinstance(value, float):
        parameter.double_param = value
    else:
        parameter.string_param = str(value)


def request_parameters(parameters: Mapping[str, pb.InferParameter]) -> tuple[dict[str, ParameterValue], bool]:
    """Request parameters as Python values, and whether empty final responses were asked for.

    Checks the InferParameter member used for each key, and refuses ``triton_`` keys but the one
    allowed, as Triton's gRPC frontend does; the values are the data plane's business.
    """
    values: dict[str, ParameterValue] = {}
    enable_empty_final = False
    for key, parameter in parameters.items():
        if key.startswith("triton_") and key != EMPTY_FINAL_KEY:  # Triton's gRPC words (HTTP has its own)
            raise invalid_arg(
                "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys "
                f"starting with 'triton_' are allowed: {EMPTY_FINAL_KEY}"
            )
        kind = parameter.WhichOneof("parameter_choice")
        accepted = _TYPED_PARAMETERS.get(key)
        if accepted is not None and kind not in accepted:
            raise invalid_arg(f"invalid value type for '{key}' parameter, expected {' or '.join(accepted)}.")
        if accepted is None and not key.startswith("triton_") and kind not in _CUSTOM_TYPES:
            raise invalid_arg(
                f"invalid value type for '{key}' parameter, expected int64_param, bool_param, or string_param."
            )
        if key == EMPTY_FINAL_KEY:
            enable_empty_final = parameter.bool_param
            continue
        if key == "priority" and kind == "int64_param" and parameter.int64_param < 0:
            raise invalid_arg("invalid value for 'priority', expected value >= 0.")
        value = parameter_value(parameter)
        if key == "timeout" and isinstance(value, int) and value < 0:
            value += 2**64  # Triton takes the int64 as the uint64 of the same bits: a very long timeout
        if value is not None:
            values[key] = value
    return values, enable_empty_final


# -- requests ---------------------------------------------------------------------------------


def decode_request(
    request: pb.ModelInferRequest,
    raw: Sequence[Buffer],
    model_name: str,
    signature: ModelSignature,
    shared_memory: SharedMemoryRegistry | None = None,
) -> DecodedRequest:
    """Decode a ModelInferRequest for ``model_name`` into tensors and parameters; ``raw`` holds its
    ``raw_input_contents`` (see :func:`naiad.grpc.messages.parse_request`), one entry for each input
    not in shared memory. Shared-memory windows are resolved in ``shared_memory`` (refused without one).
    Data of the wrong size is refused last, as Triton refuses it: after what ``signature`` refuses."""
    parameters, enable_empty_final = request_parameters(request.parameters)
    inputs: list[Tensor] = []
    mismatched: dict[str, str] = {}  # messages, not errors: an error's traceback would hold the request
    seen: set[str] = set()
    windows: list[Window] = []
    index = 0
    for tensor in request.inputs:
        if tensor.name in seen:
            raise input_already_exists(tensor.name, request.id)
        seen.add(tensor.name)
        reference = _region_reference(tensor)
        decode: Callable[[], Tensor]
        if reference is not None:
            if tensor.HasField("contents"):
                raise invalid_arg(
                    f"unexpected 'content' provided when using shared memory for input tensor '{tensor.name}' "
                    f"for model '{model_name}'"
                )
            decode = partial(_shared_tensor, tensor, reference, shared_memory, model_name, request.id, windows)
        else:
            if raw and tensor.HasField("contents"):
                raise invalid_arg(
                    f"contents field must not be specified when using raw_input_contents for '{tensor.name}' "
                    f"for model '{model_name}'"
                )
            chunk: Buffer | None = None
            if raw:
                chunk = raw[index] if index < len(raw) else None
                index += 1
            elif tensor.HasField("contents"):
                chunk = _typed_bytes(tensor, model_name)
            if chunk is None:
                raise invalid_arg(
                    f"unable to find data for input tensor '{tensor.name}' for model '{model_name}' in request."
                )
            decode = partial(_tensor, tensor, chunk, model_name, request.id)
        try:
            inputs.append(decode())
        except ByteSizeMismatch as error:
            mismatched[tensor.name] = error.message
            inputs.append(Tensor(tensor.name, tensor.datatype, np.broadcast_to(np.uint8(0), tuple(tensor.shape))))
    outputs = _requested_outputs(request, shared_memory)
    if mismatched:
        validate_outputs(model_name, signature, [output.name for output in outputs])
        validate_inputs(model_name, signature, inputs, request.id)
        raise ByteSizeMismatch(first_in_triton_order(mismatched, [tensor.name for tensor in inputs]))
    in_shared_memory = frozenset(output.name for output in outputs if output.destination is not None)
    return DecodedRequest(request.id, inputs, outputs, parameters, enable_empty_final, in_shared_memory, tuple(windows))


_SharedTensor = pb.ModelInferRequest.InferInputTensor | pb.ModelInferRequest.InferRequestedOutputTensor


def _region_reference(tensor: _SharedTensor) -> RegionReference | None:
    """A tensor's ``shared_memory_*`` parameters, checked as Triton checks them; None if it has none."""
    parameters = tensor.parameters
    region = parameters.get("shared_memory_region")
    if region is not None and region.WhichOneof("parameter_choice") != "string_param":
        raise invalid_arg(
            f"invalid value type for 'shared_memory_region' parameter for tensor '{tensor.name}', "
            "expected string_param."
        )
    values = {}
    for key in ("shared_memory_offset", "shared_memory_byte_size"):
        value = parameters.get(key)
        if value is None:
            continue
        if region is None:
            raise invalid_arg(
                f"'{key}' can not be specified without 'shared_memory_region' parameter for tensor '{tensor.name}'"
            )
        if value.WhichOneof("parameter_choice") != "int64_param":
            raise invalid_arg(
                f"invalid value type for '{key}' parameter for tensor '{tensor.name}', expected int64_param."
            )
        values[key] = value.int64_param
    if region is None:
        return None
    if "shared_memory_byte_size" not in values:
        raise invalid_arg(
            f"'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor "
            f"'{tensor.name}'"
        )
    offset = values.get("shared_memory_offset", 0)
    if offset < 0:
        raise invalid_arg(f"Invalid offset for shared memory region: '{region.string_param}'")
    return RegionReference(region.string_param, offset, values["shared_memory_byte_size"])


def _shared_tensor(
    tensor: pb.ModelInferRequest.InferInputTensor,
    reference: RegionReference,
    shared_memory: SharedMemoryRegistry | None,
    model_name: str,
    request_id: str,
    windows: list[Window],
) -> Tensor:
    window = window_of(shared_memory, reference, writable=False)
    windows.append(window)
    datatype = datatypes.BY_WIRE.get(tensor.datatype)
    if datatype is None:
        return Tensor(tensor.name, "<invalid>", np.empty(0, dtype=np.uint8))
    shape = list(tensor.shape)
    if any(dim < 0 for dim in shape):
        raise invalid_arg(
            f"{request_prefix(request_id)}All input dimensions should be specified for input "
            f"'{tensor.name}' for model '{model_name}', got [{','.join(str(dim) for dim in shape)}]"
        )
    return input_tensor(window, tensor.name, datatype, shape, model_name, request_id)


def _tensor(tensor: pb.ModelInferRequest.InferInputTensor, chunk: Buffer, model_name: str, request_id: str) -> Tensor:
    shape = list(tensor.shape)
    if any(dim < 0 for dim in shape):
        raise invalid_arg(
            f"{request_prefix(request_id)}All input dimensions should be specified for input "
            f"'{tensor.name}' for model '{model_name}', got [{','.join(str(dim) for dim in shape)}]"
        )
    datatype = datatypes.BY_WIRE.get(tensor.datatype)
    if datatype is None:
        # Triton names an unknown datatype '<invalid>'; the data plane's datatype check
        # always refuses this placeholder (no config datatype has that name).
        return Tensor(tensor.name, "<invalid>", np.empty(0, dtype=np.uint8))
    # Checked on a view of the message, then copied once: tensors are writable, as on HTTP.
    data = from_bytes(chunk, datatype, shape, tensor.name, model_name, request_id)
    return Tensor(tensor.name, datatype.wire, data if data.flags.writeable else data.copy())


def _typed_bytes(tensor: pb.ModelInferRequest.InferInputTensor, model_name: str) -> bytes:
    """The raw little-endian encoding of an input's typed ``contents``."""
    expected = _CONTENTS_FIELD.get(tensor.datatype)
    for descriptor, _ in tensor.contents.ListFields():
        if descriptor.name != expected:
            raise invalid_arg(
                f"unexpected explicit tensor data for input tensor '{tensor.name}' for model '{model_name}' "
                f"of type '{_FIELDS[descriptor.name][0]}', expected datatype '{tensor.datatype}'"
            )
    if expected is None:  # an unknown datatype with empty contents: refused by validation
        return b""
    values = getattr(tensor.contents, expected)
    if expected == "bytes_contents":
        return datatypes.serialize_bytes(np.array(list(values), dtype=np.object_))
    datatype = datatypes.BY_WIRE[tensor.datatype]
    carried = np.asarray(values, dtype=_FIELDS[expected][1])
    return carried.astype(datatype.numpy.newbyteorder("<")).tobytes()


def _requested_outputs(
    request: pb.ModelInferRequest, shared_memory: SharedMemoryRegistry | None
) -> list[RequestedOutput]:
    outputs: dict[str, RequestedOutput] = {}
    for output in request.outputs:
        reference = _region_reference(output)
        if reference is not None and "classification" in output.parameters:
            raise invalid_arg("output can't set both 'shared_memory_region' and 'classification'")
        destination = None
        if reference is not None:
            destination = RegionDestination(window_of(shared_memory, reference, writable=True), output.name)
        classes = 0
        if "classification" in output.parameters:
            classification = output.parameters["classification"]
            if classification.WhichOneof("parameter_choice") != "int64_param":
                raise invalid_arg("invalid value type for 'classification' parameter, expected int64_param")
            if classification.int64_param < 1:
                raise invalid_arg("invalid value for 'classification' parameter, expected >= 0")
            classes = classification.int64_param
        outputs.setdefault(
            output.name, RequestedOutput(output.name, classification=classes, destination=destination)
        )  # a name twice: once
    return list(outputs.values())


# -- responses --------------------------------------------------------------------------------


def encode_response(
    response: InferenceResponse,
    *,
    model_name: str,
    model_version: str,
    request_id: str,
    final: bool | None = None,
    in_shared_memory: frozenset[str] = frozenset(),
) -> Encoded:
    """A ModelInferResponse with every output's bytes in ``raw_output_contents`` (an empty entry for
    those written to shared memory, as Triton sends) and, unless ``final`` is None, the
    ``triton_final_response`` flag."""
    head = pb.ModelInferResponse(model_name=model_name, model_version=model_version, id=request_id)
    for key, value in response.parameters.items():
        set_parameter(head.parameters[key], value)
    for tensor in response.outputs:
        head.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
    raw = [b"" if tensor.name in in_shared_memory else wire_array(tensor).data for tensor in response.outputs]
    return bare_response(head, final, raw)


def bare_response(head: pb.ModelInferResponse, final: bool | None, raw: Sequence[Buffer] = ()) -> Encoded:
    """``head`` serialized (with ``raw`` as its raw outputs) and its final flag, unless None
    (requests that never ran get none)."""
    if final is not None:
        head.parameters[FINAL_KEY].bool_param = final
    return messages.infer_response(head, raw)


def check_size(size: int, limit: int) -> None:
    """Refuse a response larger than the gRPC message limit (INVALID_ARG, as Triton answers)."""
    if size > limit:
        raise invalid_arg(
            f"the response is {size} bytes, more than the gRPC message limit of {limit} bytes "
            "(--grpc-max-message-size); ask for fewer outputs or a smaller batch"
        )


def stream_response(response: Encoded, error: NaiadError | None = None) -> Encoded:
    """A ModelStreamInfer response: ``response`` and the error, if it is one (its text cut to
    what a trailer-sized field should carry)."""
    return messages.stream_response(response, "" if error is None else cut_details(error.message))
