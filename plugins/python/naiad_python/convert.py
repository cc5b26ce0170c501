"""Conversions between naiad's core request/response types and the ``pb_utils`` ones."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import ErrorCode, NaiadError, datatypes
from naiad.backend import InferenceRequest as CoreRequest
from naiad.backend import InferenceResponse as CoreResponse
from naiad.backend import Tensor as CoreTensor
from naiad_python.pbutils.errors import TritonError
from naiad_python.pbutils.request import InferenceRequest
from naiad_python.pbutils.response import InferenceResponse, InferenceResponseSender, ParameterValue
from naiad_python.pbutils.tensor import Tensor
from naiad_python.pbutils.types import BYTES


def input_tensor(tensor: CoreTensor) -> Tensor:
    """A core tensor (a request input, a BLS output) as a ``pb_utils.Tensor`` sharing its data.

    Read-only data (a client's shared memory) is copied: models may write to their inputs, as
    Triton's python backend lets them.
    """
    array = tensor.numpy()
    if not array.flags.writeable:
        return arena_input(tensor.name, tensor.datatype, array.copy())
    return Tensor._wrap(tensor.name, array, datatypes.from_wire(tensor.datatype).number, tensor)


def arena_input(name: str, datatype: str, array: npt.NDArray[Any]) -> Tensor:
    """A request input as a ``pb_utils.Tensor`` over ``array``, the model's own copy of the data."""
    return Tensor._wrap(name, array, datatypes.from_wire(datatype).number)


def output_tensor(tensor: Tensor, *, copy: bool = True) -> CoreTensor:
    """A model output as a core tensor.

    A tensor naiad handed the model goes out as it came in; numeric data the model made is copied,
    as Triton does when it sends, unless ``copy`` is false: the sender copies it before it returns.
    """
    if tensor._core is not None:
        return tensor._core
    number = tensor.triton_dtype()
    data = tensor._wire_array()
    if number == BYTES:
        data = datatypes.to_bytes_array(data)
    elif copy:
        data = np.array(data, copy=True, order="C")
    return CoreTensor(tensor.name(), datatypes.BY_NUMBER[number].wire, data)


def bls_input(tensor: Tensor) -> CoreTensor:
    """A BLS request input as a core tensor, by reference: never copied."""
    if tensor._core is not None:
        return tensor._core
    return CoreTensor(tensor.name(), datatypes.BY_NUMBER[tensor.triton_dtype()].wire, tensor._wire_array())


def core_error(error: TritonError) -> NaiadError:
    """A ``TritonError`` as a ``NaiadError`` with the same code and message."""
    return NaiadError(error.message(), ErrorCode[error.code().name])


def bls_error(error: NaiadError, prefix: str = "") -> TritonError:
    """A BLS request's failure as the model gets it: its message after ``prefix``, code INTERNAL
    whatever the cause (a refusal, the callee's own code), as Triton's python backend gives it."""
    return TritonError(prefix + error.message, TritonError.INTERNAL)


def bls_response(response: CoreResponse) -> InferenceResponse:
    """A response to a BLS request as the ``pb_utils.InferenceResponse`` the model gets.

    Its output tensors share the server's data. Parameters other than bool, int and str, which
    ``pb_utils`` cannot carry, make it an error response, as in Triton.
    """
    if response.error is not None:
        return InferenceResponse(error=bls_error(response.error))
    parameters: dict[str, ParameterValue] = {}
    for key, value in response.parameters.items():
        if not isinstance(value, bool | int | str):
            return InferenceResponse(error=TritonError(f"Unsupported parameter type for parameter '{key}'."))
        parameters[key] = value
    return InferenceResponse([input_tensor(tensor) for tensor in response.outputs], parameters=parameters)


def core_response(
    response: InferenceResponse | None, requested: frozenset[str], *, copy: bool = True
) -> CoreResponse | None:
    """A model response as a core response, keeping only the requested outputs (``copy``: see
    :func:`output_tensor`)."""
    if response is None:
        return None
    parameters: dict[str, Any] = dict(response._parameter_dict())
    error = response.error()
    if error is not None:  # the model's answer counts its request a success, as in Triton
        return CoreResponse(error=core_error(error), parameters=parameters, fails_request=response._backend_failure)
    outputs = [output_tensor(t, copy=copy) for t in response.output_tensors() if t.name() in requested]
    return CoreResponse(outputs=outputs, parameters=parameters)


def request_parameters(parameters: Mapping[str, Any]) -> str:
    """A request's custom parameters (the core keeps the scheduling ones apart) as the JSON string
    ``request.parameters()`` returns."""
    if not parameters:  # most requests: no encoder run for nothing
        return "{}"
    return json.dumps(dict(parameters), separators=(",", ":"), ensure_ascii=False)  # compact, text as is: Triton's


def received_request(
    request: CoreRequest, *, decoupled: bool, config_outputs: Sequence[str], copy_outputs: bool = True
) -> InferenceRequest:
    """The ``pb_utils.InferenceRequest`` handed to ``execute`` for one core request (``copy_outputs``:
    see :func:`output_tensor`)."""
    requested = list(request.requested_outputs) or list(config_outputs)
    sender = InferenceResponseSender(
        _deliverer(request, frozenset(requested), copy_outputs),
        decoupled=decoupled,
        is_cancelled=request.is_cancelled,
    )
    return InferenceRequest._received(
        request_id=request.id,
        correlation_id=request.correlation_id,
        inputs=[input_tensor(tensor) for tensor in request.inputs.values()],
        requested_output_names=requested,
        model_name=request.model_name,
        model_version=request.model_version,
        flags=request.flags,
        timeout=request.timeout_us,
        parameters=request_parameters(request.parameters),
        sender=sender,
        is_cancelled=request.is_cancelled,
    )


def _deliverer(
    request: CoreRequest, requested: frozenset[str], copy: bool
) -> Callable[[InferenceResponse | None, bool], None]:
    core_sender = request.sender

    def deliver(response: InferenceResponse | None, final: bool) -> None:
        core_sender.send(core_response(response, requested, copy=copy), final=final)

    return deliver
