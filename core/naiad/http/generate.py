"""The generate extension: flat JSON in, one JSON object per model response out.

``/generate`` answers with exactly one response; ``/generate_stream`` sends each response as a
server-sent event. Any model may be used, decoupled or not.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

from naiad.dataplane import DataPlane, ResponseStream
from naiad.errors import ByteSizeMismatch, NaiadError, invalid_arg, request_prefix
from naiad.http.codec import (
    NOT_JSON_DATATYPES,
    flatten,
    json_numbers,
    json_strings,
    json_values,
    load_json,
    parse_error,
    refuse_half_json,
)
from naiad.http.json_body import dump_json
from naiad.inference import InferenceResponse, ParameterValue, ResponseEvent, Scheduling
from naiad.models import InputSpec, ServingModel
from naiad.tensor import Tensor
from naiad.tracing import FrontendTiming
from naiad.validation import string_count_mismatch
from naiad.wire import INT64_MAX

EventStream = AsyncGenerator[ResponseEvent, None]
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


class JsonObject(dict[str, Any]):
    """A JSON object as Triton's reader keeps it: a key written twice is found with its first value,
    and ``written`` lists the keys as written, repeats included."""

    __slots__ = ("written",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.written = [key for key, _ in pairs]
        for key, value in pairs:
            self.setdefault(key, value)


def decode_generate(model: ServingModel, body: bytes) -> GenerateRequest:
    """Map a generate body onto the model's inputs and request parameters, as Triton 2.51 does: keys
    naming an input are inputs, others are parameters, and the keys of a ``parameters`` object are
    read the same way where it stands; an input given twice is refused."""
    document = load_json(body, JsonObject)
    if not isinstance(document, JsonObject):
        raise parse_error("attempt to get members for non-object")
    request_id = document.get("id", "")
    if not isinstance(request_id, str):
        raise parse_error("Unable to parse 'id': attempt to access JSON non-string as string")
    reader = _GenerateReader(model, request_id)
    for key in document.written:
        if key == "parameters":
            reader.nested(document[key])
        else:
            reader.member(key, document[key])
    return GenerateRequest(model, list(reader.inputs.values()), reader.parameters, request_id)


class _GenerateReader:
    """The inputs and parameters of one generate body, filled member by member in the body's order."""

    def __init__(self, model: ServingModel, request_id: str) -> None:
        self.specs = model.signature.inputs
        self.batching = model.signature.max_batch_size > 0
        self.where = (model.name, request_id)  # for Triton's words
        self.inputs: dict[str, Tensor] = {}
        self.parameters: dict[str, ParameterValue] = {}

    def member(self, key: str, value: Any) -> None:
        """One key of a generate body: an input when it names one (once only), else a parameter."""
        spec = self.specs.get(key)
        if spec is not None:
            if key in self.inputs:
                raise invalid_arg(f"{request_prefix(self.where[1])}input '{key}' already exists in request")
            self.inputs[key] = _to_tensor(spec, value, self.batching, self.where)
        elif isinstance(value, int) and not isinstance(value, bool) and not -INT64_MAX - 1 <= value <= INT64_MAX:
            self.parameters[key] = float(value)  # as Triton's JSON reader gives an integer beyond int64
        elif isinstance(value, str | int | float | bool):
            self.parameters[key] = value
        else:
            raise invalid_arg(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'.")

    def nested(self, members: Any) -> None:
        """The keys of a ``parameters`` object; what they fail with is prefixed as Triton words it."""
        if "parameters" in self.specs:
            raise invalid_arg("Keyword 'parameters' for nested schema also given as input tensor name")
        if not isinstance(members, JsonObject):
            raise parse_error(
                "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"
            )
        try:
            for key in members.written:
                self.member(key, members[key])
        except NaiadError as error:
            error.message = f"Converting keyword: 'parameters': {error.message}"
            error.args = (error.message,)
            raise


def _to_tensor(spec: InputSpec, value: Any, batching: bool, where: tuple[str, str]) -> Tensor:
    """An input from a JSON value. Its shape is the config's, with the last variable dimension the
    length of the value (1 for a scalar); nested arrays inside it are its data, flattened."""
    values = value if isinstance(value, list) else [value]
    flat = flatten(values)
    datatype = spec.datatype
    strings = json_strings(flat) if datatype.wire == "BYTES" else None  # read before the shape, as in Triton
    shape = ([-1] if batching else []) + list(spec.dims)
    variable = [index for index, dim in enumerate(shape) if dim == -1]
    for index in variable[:-1]:
        shape[index] = 1
    if variable:
        known = math.prod(dim for dim in shape if dim != -1)
        shape[variable[-1]] = len(values) // known if known and len(values) % known == 0 else -1
    if math.prod(shape) != len(values):
        raise invalid_arg(f"The schema can not convert input '{spec.name}' to tensor with proper shape")
    if strings is not None:
        if len(flat) != len(values):  # Triton counts the strings it was given against the shape
            raise ByteSizeMismatch(string_count_mismatch(len(flat), len(values), spec.name, *where))
        return Tensor(spec.name, "BYTES", strings.reshape(shape))
    if len(flat) != len(values):
        raise parse_error("Unable to parse 'data': Shape does not match true shape of 'data' field")
    refuse_half_json(datatype, spec.name)
    return Tensor(spec.name, datatype.wire, json_numbers(flat, datatype).reshape(shape))


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
    values = json_values(tensor)
    return values[0] if len(values) == 1 else values


def open_generate(dataplane: DataPlane, request: GenerateRequest, frontend: FrontendTiming | None) -> ResponseStream:
    """Queue a generate request (refusals raise here). As in Triton, every parameter reaches the model
    as given, ``sequence_id``, ``priority``, ``timeout`` and ``triton_*`` keys too: generate has no
    scheduling parameters."""
    return dataplane.open_stream(
        request.model,
        request.inputs,
        request_id=request.id,
        parameters=request.parameters,
        scheduling=Scheduling(),
        frontend=frontend,
    )


async def generate_once(request: GenerateRequest, stream: ResponseStream) -> tuple[int, dict[str, Any]]:
    """Collect a generate request's responses; exactly one is expected. The status and body as
    Triton answers them: 400 when the first response is an error, the error of a lone failed
    response, and :data:`ONE_RESPONSE_EXPECTED` for any other count of responses, failed ones too."""
    first: InferenceResponse | None = None
    count = 0
    async for event in stream.events():
        if event.response is not None:
            first = first or event.response
            count += 1
    status = 400 if first is not None and first.error is not None else 200
    if count != 1 or first is None:
        return status, {"error": ONE_RESPONSE_EXPECTED}
    if first.error is not None:
        return status, {"error": first.error.message}
    try:
        return status, response_document(request.model, request.id, first)
    except NaiadError as error:  # an output JSON cannot carry
        return 400, {"error": error.message}


async def first_event(stream: ResponseStream) -> tuple[EventStream, ResponseEvent | NaiadError | None]:
    """A stream's events and its first one that carries a response (an error that ended it instead,
    or None if it ended without a response); iterating the events goes on after that one."""
    events = cast(EventStream, stream.events())
    try:
        async for event in events:
            if event.response is not None:
                return events, event
    except NaiadError as error:
        return events, error
    return events, None


def stream_status(first: ResponseEvent | NaiadError | None) -> int:
    """A ``generate_stream`` answer's status, set by its first response as Triton sets it: 400 when
    that response is an error."""
    if isinstance(first, NaiadError):
        return 400
    response = first.response if first is not None else None
    if response is None:
        return 200
    return 400 if response.error is not None or any(t.datatype in NOT_JSON_DATATYPES for t in response.outputs) else 200


async def generate_events(
    request: GenerateRequest, events: EventStream, first: ResponseEvent | NaiadError | None
) -> AsyncIterator[bytes]:
    """Server-sent events, one per response, from ``first`` on; a failed response is an error event
    and the stream goes on until the model's final flag, as in Triton."""
    async with contextlib.aclosing(events):
        if isinstance(first, NaiadError):
            yield _event({"error": first.message})
        elif first is not None:
            try:
                yield _response_event(request, first)
                if not first.final:
                    async for event in events:
                        if event.response is not None:
                            yield _response_event(request, event)
            except NaiadError as error:
                yield _event({"error": error.message})


def _response_event(request: GenerateRequest, event: ResponseEvent) -> bytes:
    response = event.response
    assert response is not None, "only events with a response become server-sent events"
    if response.error is not None:
        return _event({"error": response.error.message})
    try:
        return _event(response_document(request.model, request.id, response))
    except NaiadError as error:  # an output JSON cannot carry: an error event, as in Triton
        return _event({"error": error.message})


def _event(document: dict[str, Any]) -> bytes:
    return b"data: " + dump_json(document) + b"\n\n"
