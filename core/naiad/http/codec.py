"""KServe v2 JSON bodies with the binary tensor data extension, both directions.

Requests are ``<JSON><binary chunks>`` where ``Inference-Header-Content-Length`` gives the
JSON length; binary inputs become numpy views over the body (no copy). Responses put
binary outputs after the JSON in output order.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import ByteSizeMismatch, ErrorCode, NaiadError, invalid_arg, request_prefix
from naiad.http import nesting
from naiad.http.json_body import dump_json
from naiad.http.json_errors import not_json, syntax_error
from naiad.inference import InferenceResponse, ParameterValue, RequestedOutput
from naiad.models import ModelSignature
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
    string_count_mismatch,
    validate_inputs,
    validate_outputs,
)
from naiad.wire import INT64_MAX, element_count, from_bytes, tensor_bytes


def parse_error(message: str) -> NaiadError:
    """A body Triton could not parse at all: answered with 500, as Triton 2.51 does."""
    return NaiadError(message, ErrorCode.INTERNAL)


@dataclass(slots=True)
class DecodedRequest:
    """An infer request body, decoded; its inputs were checked against the model's (the service checks again)."""

    id: str
    inputs: list[Tensor]
    outputs: list[RequestedOutput]
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    binary_default: bool = False
    input_windows: tuple[Window, ...] = ()  # keep their regions in use until the request is answered


@dataclass(slots=True)
class _Declared:
    """One input as the JSON declares it: its JSON data already read, its binary or shared-memory
    data not yet.

    It stands in for the array in a :class:`Tensor` (which reads ``data.shape``) so a request's
    inputs are checked against the model before binary data is decoded and sizes are compared.
    """

    shape: tuple[int, ...]
    count: int
    datatype: datatypes.DataType | None  # None: a name Triton does not know (the model check refuses it)
    binary: bool
    data: Any = None  # JSON data, decoded: BYTES' strings flat, every other type in its shape
    size: int = 0  # binary_data_size
    window: Window | None = None  # the shared-memory window holding the data


def decode_request(
    body: bytes | bytearray,
    header_length: int | None,
    model_name: str,
    signature: ModelSignature,
    max_input_size: int = INT64_MAX,
    shared_memory: SharedMemoryRegistry | None = None,
) -> DecodedRequest:
    """Decode an infer request body for ``model_name``.

    Every input's shape and size is checked, and the inputs are validated against the model, before
    any tensor data is decoded; binary inputs become views of ``body`` (copied first unless it is a
    ``bytearray``, so that tensors stay writable, as Triton's python backend hands them out). Inputs
    and outputs in shared memory are resolved in ``shared_memory`` (refused without one).
    """
    if header_length == 0 or (header_length is None and not body):  # Triton reads no body as raw data
        return _decode_raw(body, model_name, signature)
    json_end = len(body) if header_length is None else header_length
    if header_length is not None and not 0 < header_length <= len(body):
        raise invalid_arg(f"inference header size should be in range (0, {len(body)}), got: {header_length}")
    document = load_json(body if json_end == len(body) else bytes(memoryview(body)[:json_end]))
    if not isinstance(document, dict):
        raise parse_error("Unable to parse 'inputs': attempt to access non-existing object member 'inputs'")
    request_id = document.get("id", "")
    if not isinstance(request_id, str):
        raise parse_error("Unable to parse 'id': attempt to access JSON non-string as string")
    parameters = _parameters(document.get("parameters", {}))
    binary_default = bool(parameters.pop("binary_data_output", False))  # the frontend's, never the model's
    raw_inputs = document.get("inputs")
    if raw_inputs is None:
        raise parse_error("Unable to parse 'inputs': attempt to access non-existing object member 'inputs'")
    if not isinstance(raw_inputs, list):
        raise parse_error("Unable to parse 'inputs': attempt to access JSON non-array as array")
    binary_length = len(body) - json_end
    declared: list[Tensor] = []
    names: set[str] = set()
    offset = 0
    for raw in raw_inputs:
        tensor = _declare_input(
            raw, binary_length - offset, model_name, request_id, max_input_size, shared_memory, names
        )
        offset += tensor.data.size
        declared.append(tensor)
    if offset != binary_length:
        raise invalid_arg(f"unexpected additional input data for model '{model_name}'")
    outputs = _outputs(document.get("outputs"), shared_memory)
    validate_outputs(model_name, signature, [output.name for output in outputs])  # before inputs, as in Triton
    validate_inputs(model_name, signature, declared, request_id)
    binary = memoryview(body)[json_end:]
    if binary and not isinstance(body, bytearray):
        binary = memoryview(bytearray(binary))
    inputs: list[Tensor] = []
    mismatched: dict[str, str] = {}  # messages, not errors: an error's traceback would hold the request
    offset = 0
    for tensor in declared:
        try:
            inputs.append(_decode_data(tensor, binary, offset, model_name, request_id))
        except ByteSizeMismatch as error:  # reported once every input's data has been read, as Triton does
            mismatched[tensor.name] = error.message
        offset += tensor.data.size
    if mismatched:
        raise ByteSizeMismatch(first_in_triton_order(mismatched, [tensor.name for tensor in declared]))
    windows = tuple(tensor.data.window for tensor in declared if tensor.data.window is not None)
    return DecodedRequest(request_id, inputs, outputs, parameters, binary_default, windows)


def load_json(data: bytes | bytearray, object_pairs_hook: nesting.ObjectHook | None = None) -> Any:
    """A request body's JSON document; a body that is not JSON is Triton's 500. Bytes that are not
    UTF-8 pass through strings as Triton's parser lets them (kept as surrogate escapes, which
    BYTES data turns back into the same bytes). ``object_pairs_hook``: as for ``json.loads``."""
    try:
        try:
            return nesting.loads(data, object_pairs_hook)
        except UnicodeDecodeError:
            return nesting.loads(bytes(data).decode("utf-8", "surrogateescape"), object_pairs_hook)
    except ValueError as error:
        end = data.find(b"\0")
        if end >= 0 and syntax_error(data) is None:  # rapidjson reads a NUL byte as the end of the text
            return load_json(data[:end], object_pairs_hook)
        raise parse_error(not_json(data, error)) from None


def _parameters(raw: Any) -> dict[str, ParameterValue]:
    if not isinstance(raw, dict):  # null too: Triton lists the members of any "parameters" it finds
        raise parse_error("failed to get request params.: attempt to get members for non-object")
    for key, value in raw.items():
        read = _TRITON_JSON.get(key)  # read as its own type first, as Triton reads them
        if read is not None and not read[0](value):
            raise parse_error(f"Unable to parse '{key}': attempt to access JSON {read[1]}")
        if not isinstance(value, str | int | float | bool):
            raise invalid_arg(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'.")
    return dict(raw)


_SIGNED_RANGE = range(-(2**63), 2**63)
_UNSIGNED_RANGE = range(2**64)


def _is_unsigned(value: object) -> bool:
    return type(value) is int and value in _UNSIGNED_RANGE


def _is_signed(value: object) -> bool:
    return type(value) is int and value in _SIGNED_RANGE


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


# How Triton reads each parameter it handles itself, and what it says when the JSON value is not that.
_TRITON_JSON: dict[str, tuple[Callable[[object], bool], str]] = {
    "sequence_id": (lambda value: _is_unsigned(value) or isinstance(value, str), "non-string as string"),
    "sequence_start": (_is_bool, "non-boolean as boolean"),
    "sequence_end": (_is_bool, "non-boolean as boolean"),
    "priority": (_is_unsigned, "non-unsigned-integer as unsigned-integer"),
    "timeout": (_is_unsigned, "non-unsigned-integer as unsigned-integer"),
    "binary_data_output": (_is_bool, "non-boolean as boolean"),
}


def _outputs(raw: Any, shared_memory: SharedMemoryRegistry | None) -> list[RequestedOutput]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise parse_error("Unable to parse 'outputs': attempt to access JSON non-array as array")
    outputs = []
    for entry in raw:
        fields = entry if isinstance(entry, dict) else {}
        parameters = _parameters_object(fields)
        binary = parameters.get("binary_data")
        in_shared_memory = "shared_memory_region" in parameters
        if in_shared_memory:
            if "classification" in parameters:
                raise invalid_arg("Output can't set both 'shared_memory_region' and 'classification'")
            if binary is not None and not isinstance(binary, bool):
                raise parse_error("Unable to set 'binary_data': attempt to access JSON non-boolean as boolean")
            if binary:
                raise invalid_arg("Output can't set both 'shared_memory_region' and 'binary_data'")
        name = _member(fields, "name", str, "non-string as string")
        classification = parameters.get("classification", 0)
        if not _is_unsigned(classification):
            raise parse_error(
                "Unable to set 'classification': attempt to access JSON non-unsigned-integer as unsigned-integer"
            )
        destination = None
        if in_shared_memory:
            destination = RegionDestination(_window(parameters, shared_memory, writable=True), name)
        elif binary is not None and not isinstance(binary, bool):
            raise parse_error("Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean")
        outputs.append(RequestedOutput(name, binary, classification, destination))
    return outputs


def _window(parameters: dict[str, Any], shared_memory: SharedMemoryRegistry | None, *, writable: bool) -> Window:
    """The checked shared-memory window a tensor's ``shared_memory_*`` parameters name."""
    region = parameters["shared_memory_region"]
    if not isinstance(region, str):
        raise parse_error("Unable to parse 'shared_memory_region': attempt to access JSON non-string as string")
    offset, byte_size = (parameters.get(key, 0) for key in ("shared_memory_offset", "shared_memory_byte_size"))
    for key, value in (("shared_memory_offset", offset), ("shared_memory_byte_size", byte_size)):
        if not _is_unsigned(value):
            raise _not_unsigned(key)
    return window_of(shared_memory, RegionReference(region, offset, byte_size), writable=writable)


def _declare_input(
    raw: Any,
    binary_left: int,
    model_name: str,
    request_id: str,
    max_input_size: int,
    shared_memory: SharedMemoryRegistry | None,
    names: set[str],
) -> Tensor:
    """An input read in Triton's order: where its data is, its name, datatype and shape, then its
    JSON data (decoded now, as Triton parses it) or where its binary or shared-memory data lies."""
    fields = raw if isinstance(raw, dict) else {}
    parameters = _parameters_object(fields)
    sources = [
        label
        for label, present in (
            ("'data'", "data" in fields),
            ("'binary_data_size'", "binary_data_size" in parameters),
            ("'shared_memory_region'", "shared_memory_region" in parameters),
        )
        if present
    ]
    if len(sources) != 1:
        raise invalid_arg(
            "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
            "'shared_memory_region' in 'parameters'. But "
            + (f"set {' '.join(sources)}" if sources else "no field is set")
        )
    name = _member(fields, "name", str, "non-string as string")
    datatype_name = _member(fields, "datatype", str, "non-string as string")
    shape = _member(fields, "shape", list, "non-array as array")
    if not all(_is_unsigned(dim) for dim in shape):
        raise _not_unsigned("shape")
    if name in names:
        raise input_already_exists(name, request_id)
    names.add(name)
    datatype = datatypes.BY_WIRE.get(datatype_name)
    wire = datatype.wire if datatype is not None else _UNKNOWN_DATATYPE
    if sources[0] == "'shared_memory_region'":
        window = _window(parameters, shared_memory, writable=False)
        return Tensor(name, wire, _Declared(tuple(shape), 0, datatype, True, window=window))
    if sources[0] == "'binary_data_size'":
        size = parameters["binary_data_size"]
        if not _is_unsigned(size):
            raise _not_unsigned("binary_data_size")
        if size > binary_left:
            raise invalid_arg(
                f"unexpected size for input '{name}', expecting {size - binary_left} additional bytes "
                f"for model '{model_name}'"
            )
        count = element_count(name, shape, datatype or _NO_BYTE_SIZE)
        return Tensor(name, wire, _Declared(tuple(shape), count, datatype, True, size=size))
    count = element_count(name, shape, datatype or _NO_BYTE_SIZE)
    if count == 0 or not shape:  # Triton reads no data for an empty tensor, nor for shape [] (its count is 0)
        empty = np.empty(shape, dtype=datatype.numpy if datatype is not None else np.uint8)
        return Tensor(name, wire, _Declared(tuple(shape), 0, datatype, False, empty))
    data = fields["data"]
    if not isinstance(data, list):
        raise parse_error("Unable to parse 'data': attempt to access JSON non-array as array")
    if datatype is not None and datatype.wire == "BYTES":  # counted after the model's checks, as in Triton
        strings = json_strings(flatten(data))
        byte_size = sum(map(len, strings)) + 4 * len(strings)
        if byte_size > max_input_size:
            raise invalid_arg(_json_too_large(name, byte_size, max_input_size))
        return Tensor(name, wire, _Declared(tuple(shape), count, datatype, False, strings))
    byte_size = count * datatype.byte_size if datatype is not None else 0
    if byte_size > max_input_size:
        raise invalid_arg(_json_too_large(name, byte_size, max_input_size))
    if datatype is None:
        raise invalid_arg(f"invalid datatype for input {name}")
    refuse_half_json(datatype, name)
    array = _json_numbers_of_shape(flatten(data), datatype, count).reshape(shape)
    return Tensor(name, wire, _Declared(tuple(shape), count, datatype, False, array))


_UNKNOWN_DATATYPE = "<invalid>"
"""How Triton names a datatype it does not know; the model check refuses it."""
_NO_BYTE_SIZE = datatypes.BY_WIRE["BYTES"]
"""Stands in for an unknown datatype where a shape's size is checked: like Triton's, it has no byte size."""


def _parameters_object(fields: dict[str, Any]) -> dict[str, Any]:
    """A tensor's ``parameters``; Triton finds nothing in parameters that are not an object."""
    parameters = fields.get("parameters")
    return parameters if isinstance(parameters, dict) else {}


def _member(fields: dict[str, Any], key: str, kind: type, wrong: str) -> Any:
    """A required member of an input, in rapidjson's words when it is missing or of the wrong kind."""
    if key not in fields:
        raise parse_error(f"Unable to parse '{key}': attempt to access non-existing object member '{key}'")
    value = fields[key]
    if not isinstance(value, kind):
        raise parse_error(f"Unable to parse '{key}': attempt to access JSON {wrong}")
    return value


def json_strings(flat: list[Any]) -> npt.NDArray[np.object_]:
    """BYTES data from JSON values, UTF-8 encoded as sent; each must be a string (Triton's words if not)."""
    if not all(isinstance(item, str) for item in flat):
        raise parse_error("Unable to parse JSON bytes array: attempt to access JSON non-string as string")
    array = np.empty(len(flat), dtype=np.object_)
    try:
        array[:] = [item.encode("utf-8", "surrogateescape") for item in flat]
    except UnicodeEncodeError:  # a \uXXXX escape of half a surrogate pair, which rapidjson refuses
        raise parse_error("failed to parse the request JSON buffer: The surrogate pair in string is invalid.") from None
    return array


def _json_numbers_of_shape(flat: list[Any], datatype: datatypes.DataType, count: int) -> npt.NDArray[Any]:
    """``count`` numbers from JSON. Triton reads element by element, so a value of the wrong type
    among the first ``count`` is named before a count that does not match."""
    values = json_numbers(flat if len(flat) == count else flat[:count], datatype)
    if len(flat) != count:
        raise parse_error("Unable to parse 'data': Shape does not match true shape of 'data' field")
    return values


def _not_unsigned(field: str) -> NaiadError:
    """rapidjson's words for a member that is not an unsigned integer."""
    return parse_error(f"Unable to parse '{field}': attempt to access JSON non-unsigned-integer as unsigned-integer")


def _json_too_large(name: str, byte_size: int, limit: int) -> str:
    return (
        f"JSON input '{name}' has a byte_size ({byte_size} bytes) that exceeds the maximum allowed value of "
        f"{limit} bytes. Use --http-max-input-size to increase the limit."
    )


def _decode_data(tensor: Tensor, binary: memoryview, offset: int, model_name: str, request_id: str) -> Tensor:
    """An input's data: its JSON data (decoded as it was read; BYTES counted now, after the model's
    checks, as Triton counts them), or its bytes in the body or in shared memory."""
    declared: _Declared = tensor.data
    shape = list(declared.shape)
    assert declared.datatype is not None, "the model's checks refuse a datatype Triton does not know"
    if declared.window is not None:
        return input_tensor(declared.window, tensor.name, declared.datatype, shape, model_name, request_id)
    if not declared.binary:
        data = declared.data
        if data.size != declared.count:  # BYTES strings, flat; every other JSON array has its shape already
            message = string_count_mismatch(data.size, declared.count, tensor.name, model_name, request_id)
            raise ByteSizeMismatch(message)
        return Tensor(tensor.name, tensor.datatype, data.reshape(shape))
    chunk = binary[offset : offset + declared.size]
    array = from_bytes(chunk, declared.datatype, shape, tensor.name, model_name, request_id)
    return Tensor(tensor.name, tensor.datatype, array)


def refuse_half_json(datatype: datatypes.DataType, name: str) -> None:
    """Triton's refusal of FP16 and BF16 input data in JSON."""
    if datatype.wire in ("FP16", "BF16"):
        raise invalid_arg(
            f"receiving {datatype.wire} data via JSON is not supported. Please use the binary data format "
            f"for input {name}"
        )


def json_numbers(flat: list[Any], datatype: datatypes.DataType) -> npt.NDArray[Any]:
    """JSON values as a flat array of a non-BYTES ``datatype``, read as Triton reads them: BOOL wants
    booleans, integer types want integers (64-bit, then cast to the width, wrapping as C does), float
    types want numbers (cast to the width: an FP32 beyond its range is infinite)."""
    kind = datatype.numpy.kind
    if kind == "b":
        if not all(_is_bool(item) for item in flat):
            raise parse_error("Unable to parse 'data': attempt to access JSON non-boolean as boolean")
        return np.array(flat, dtype=np.bool_)
    if kind == "i":
        if not all(_is_signed(item) for item in flat):
            raise parse_error("Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer")
        return np.array(flat, dtype=np.int64).astype(datatype.numpy)
    if kind == "u":
        if not all(_is_unsigned(item) for item in flat):
            raise _not_unsigned("data")
        return np.array(flat, dtype=np.uint64).astype(datatype.numpy)
    if not all(type(item) is float or type(item) is int for item in flat):
        raise parse_error("Unable to parse 'data': attempt to access JSON non-number as double")
    try:
        values = np.array(flat, dtype=np.float64)
    except OverflowError:  # an integer beyond any double
        raise parse_error("Unable to parse 'data': attempt to access JSON non-number as double") from None
    with np.errstate(over="ignore"):
        return values.astype(datatype.numpy)


def flatten(data: Any) -> list[Any]:
    """The leaves of nested JSON arrays, in order; nesting deeper than Triton allows is refused."""
    if not isinstance(data, list):
        return [data]
    if not any(isinstance(item, list) for item in data):
        return data
    flat: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if len(stack) >= nesting.MAX_NESTING_DEPTH:
                raise nesting.too_deep()
            if isinstance(item, list):
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat


def _decode_raw(body: bytes | bytearray, model_name: str, signature: ModelSignature) -> DecodedRequest:
    """The one input of a body without a JSON header, its shape deduced from the config as Triton does:
    one variable dimension at most, sized by the body; BYTES only for an input of one element, the
    whole body being that element."""
    if len(signature.inputs) != 1:
        raise invalid_arg(
            f"{request_prefix('')}Raw request must only have 1 input (found 1) to be deduced but got "
            f"{len(signature.inputs)} inputs in '{model_name}' model configuration"
        )
    spec = next(iter(signature.inputs.values()))
    shape = [1] if signature.max_batch_size > 0 else []
    variable: int | None = None
    for dim in spec.dims:
        if dim == -1:
            if variable is not None:
                raise invalid_arg(
                    f"{request_prefix('')}The shape of the raw input '{spec.name}' can not be deduced because "
                    "there are more than one variable-sized dimension"
                )
            variable = len(shape)
        shape.append(dim)
    known = math.prod(dim for dim in spec.dims if dim != -1)
    data = body if isinstance(body, bytearray) else bytearray(body)
    if spec.datatype.wire == "BYTES":
        if variable is not None or known != 1:
            raise invalid_arg(
                f"{request_prefix('')}For BYTE datatype raw input '{spec.name}', the model must have input shape [1]"
            )
        data[:0] = struct.pack("<I", len(body))  # the body is the element: its length goes first
    elif variable is not None:
        shape[variable] = len(body) // known // spec.datatype.byte_size if known else 0
    array = from_bytes(data, spec.datatype, shape, "raw_input", model_name, "")  # errors name it so, as Triton
    return DecodedRequest("", [Tensor(spec.name, spec.datatype.wire, array)], [], {}, True)


# -- responses --------------------------------------------------------------------------------


def encode_response(
    response: InferenceResponse,
    *,
    model_name: str,
    model_version: int,
    request: DecodedRequest,
) -> tuple[list[bytes | memoryview], int | None]:
    """The response body, as the JSON and each binary output in turn (never joined: a large output is not
    copied once more), and, when it carries binary outputs, the JSON header length."""
    wanted: dict[str, RequestedOutput] = {}
    for output in request.outputs:  # an output listed twice is written as its first listing asks, as in Triton
        wanted.setdefault(output.name, output)
    document: dict[str, Any] = {}
    if request.id:
        document["id"] = request.id
    document["model_name"] = model_name
    document["model_version"] = str(model_version)
    if response.parameters:
        document["parameters"] = response.parameters
    outputs: list[dict[str, Any]] = []
    chunks: list[bytes | memoryview] = []
    for tensor in response.outputs:
        entry: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.shape),
        }
        # binary_data_output covers the outputs of a request that lists none; a listed one says for itself.
        requested = wanted.get(tensor.name)
        binary = request.binary_default if requested is None else bool(requested.binary)
        if requested is not None and requested.destination is not None:
            written = dict(requested.destination.parameters())
            if written:
                entry["parameters"] = written
        elif binary:
            raw = tensor_bytes(tensor)
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = json_values(tensor)
        outputs.append(entry)
    document["outputs"] = outputs
    header = dump_json(document)
    if not any(map(len, chunks)):  # binary outputs of no bytes: a plain JSON answer, as Triton writes it
        return [header], None
    return [header, *chunks], len(header)


NOT_JSON_DATATYPES = ("FP16", "BF16")  # outputs Triton never writes as JSON


def json_values(tensor: Tensor) -> list[Any]:
    """An output's elements as JSON values, flat; INVALID_ARG (Triton's words) for FP16 and BF16."""
    if tensor.datatype in NOT_JSON_DATATYPES:  # Triton's words, which leave the output's name out
        raise invalid_arg(
            f"sending {tensor.datatype} data via JSON is not supported. Please use the binary data format for output"
        )
    flat = tensor.numpy().reshape(-1)
    if tensor.datatype == "BYTES":
        # bytes that are not UTF-8 are written as they are (as Triton writes them), never replaced
        return [item.decode("utf-8", "surrogateescape") for item in datatypes.to_bytes_array(flat)]
    values: list[Any] = flat.tolist()
    return values
