"""The generate extension: flat JSON in, one JSON object per model response out.

``/generate`` answers with exactly one response; ``/generate_stream`` sends each response as a
server-sent event. Any model may be used, decoupled or not.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from naiad import datatypes
from naiad.dataplane import DataPlane, ResponseStream
from naiad.errors import NaiadError, invalid_arg
from naiad.http import nesting
from naiad.http.codec import parse_error
from naiad.inference import InferenceResponse, ParameterValue
from naiad.models import InputSpec, ServingModel
from naiad.tensor import Tensor

ONE_RESPONSE_EXPECTED = (
    "generate expects model to produce exactly 1 response, use generate stream for model that "
    "generates various number of responses"
)


@dataclass(slots=True)
class GenerateRequest:
    """A generate body mapped onto a model's inputs and request parameters."""

    model: ServingModel
    inputs: list[Tensor]
    parameters: dict[str, ParameterValue]
    id: str


def decode_generate(model: ServingModel, body: bytes) -> GenerateRequest:
    """Map a generate body onto the model's inputs and request parameters."""
    try:
        document = nesting.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise parse_error(f"failed to parse the request JSON buffer: {error}") from None
    if not isinstance(document, dict):
        raise parse_error("failed to parse the request JSON buffer: the document is not a JSON object")
    specs = model.signature.inputs
    batching = model.signature.max_batch_size > 0
    inputs: list[Tensor] = []
    parameters: dict[str, ParameterValue] = {}
    nested = document.pop("parameters", None) or {}
    if not isinstance(nested, dict):
        raise parse_error("Unable to parse 'parameters': attempt to access JSON non-object as object")
    for key, value in [*document.items(), *nested.items()]:
        spec = specs.get(key)
        if spec is not None:
            inputs.append(_to_tensor(spec, value, batching))
        elif isinstance(value, str | int | float | bool):
            parameters[key] = value
        else:
            raise invalid_arg(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'.")
    request_id = document.get("id", "")
    return GenerateRequest(model, inputs, parameters, request_id if isinstance(request_id, str) else "")


def _to_tensor(spec: InputSpec, value: Any, batching: bool) -> Tensor:
    values = value if isinstance(value, list) else [value]
    shape = ([-1] if batching else []) + list(spec.dims)
    variable = [index for index, dim in enumerate(shape) if dim == -1]
    for index in variable[:-1]:
        shape[index] = 1
    if variable:
        known = math.prod(dim for dim in shape if dim != -1)
        shape[variable[-1]] = len(values) // known if known and len(values) % known == 0 else -1
    if any(isinstance(item, list) for item in values) or math.prod(shape) != len(values):
        raise invalid_arg(f"The schema can not convert input '{spec.name}' to tensor with proper shape")
    datatype = spec.datatype
    if datatype.wire == "BYTES":
        if not all(isinstance(item, str) for item in values):
            raise parse_error("Unable to parse JSON bytes array: attempt to access JSON non-string as string")
        array = np.empty(len(values), dtype=np.object_)
        array[:] = [item.encode() for item in values]
        return Tensor(spec.name, "BYTES", array.reshape(shape))
    try:
        array = np.array(values, dtype=datatype.numpy)
    except (TypeError, ValueError, OverflowError):
        raise parse_error(f"Unable to parse input '{spec.name}': values do not fit {datatype.wire}") from None
    return Tensor(spec.name, datatype.wire, array.reshape(shape))


def response_document(model: ServingModel, request_id: str, response: InferenceResponse) -> dict[str, Any]:
    """One generate response object: outputs and parameters as top-level keys (sorted, like Triton)."""
    document: dict[str, Any] = {"model_name": model.name, "model_version": str(model.version)}
    if request_id:
        document["id"] = request_id
    document.update(response.parameters)
    for tensor in response.outputs:
        document[tensor.name] = _output_value(tensor)
    return dict(sorted(document.items()))


def _output_value(tensor: Tensor) -> Any:
    flat = tensor.numpy().reshape(-1)
    if tensor.datatype == "BYTES":
        values: list[Any] = [item.decode("utf-8", "replace") for item in datatypes.to_bytes_array(flat)]
    else:
        values = flat.tolist()
    return values[0] if len(values) == 1 else values


def open_generate(dataplane: DataPlane, request: GenerateRequest) -> ResponseStream:
    """Queue a generate request (refusals raise here)."""
    return dataplane.open_stream(request.model, request.inputs, request_id=request.id, parameters=request.parameters)


async def generate_once(request: GenerateRequest, stream: ResponseStream) -> dict[str, Any]:
    """Collect a generate request's responses; exactly one is expected."""
    responses: list[InferenceResponse] = []
    async for event in stream.events():
        if event.response is not None:
            if event.response.error is not None:
                raise event.response.error
            responses.append(event.response)
    if len(responses) != 1:
        return {"error": ONE_RESPONSE_EXPECTED}
    return response_document(request.model, request.id, responses[0])


async def generate_events(request: GenerateRequest, stream: ResponseStream) -> AsyncIterator[bytes]:
    """Server-sent events, one per response; an error ends the stream with an error event."""
    try:
        async for event in stream.events():
            response = event.response
            if response is None:
                continue
            if response.error is not None:
                yield _event({"error": response.error.message})
                return
            yield _event(response_document(request.model, request.id, response))
    except NaiadError as error:
        yield _event({"error": error.message})


def _event(document: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(document, separators=(",", ":")).encode() + b"\n\n"
