"""``pb_utils.InferenceRequest`` and the small classes that travel with it.

An ``InferenceRequest`` is either one naiad hands to ``execute`` (built by the backend with
:meth:`InferenceRequest._received`) or one a model builds for BLS and runs with ``exec`` or
``async_exec`` (see :mod:`naiad_python.bls`).
"""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Callable, Mapping, Sequence

from naiad_python.pbutils.errors import TritonModelException
from naiad_python.pbutils.response import (
    InferenceResponse,
    InferenceResponseSender,
    ParameterValue,
    check_parameters,
)
from naiad_python.pbutils.response_iterator import ResponseIterator
from naiad_python.pbutils.tensor import Tensor
from naiad_python.pbutils.text import text, texts

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


class MemoryType(enum.IntEnum):
    """Where BLS outputs should be placed (``PreferredMemory``)."""

    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU


class PreferredMemory:
    """A BLS output placement hint; naiad keeps every tensor in host memory."""

    __slots__ = ("preferred_device_id", "preferred_memory_type")

    def __init__(self, preferred_memory_type: MemoryType, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = MemoryType(preferred_memory_type)
        self.preferred_device_id = int(preferred_device_id)


class InferenceTrace:
    """The request's trace; naiad does not trace python models yet, so there is no context."""

    __slots__ = ("_context",)

    def __init__(self, context: str | None = None) -> None:
        self._context = context or None

    def get_context(self) -> str | None:
        """The trace context as a string, or ``None``."""
        return self._context


# What every received request carries: naiad keeps tensors in host memory and does not trace them.
_HOST_MEMORY = PreferredMemory(TRITONSERVER_MEMORY_CPU)
_NO_TRACE = InferenceTrace()


class InferenceRequest:
    """A request: received in ``execute``, or built by the model for BLS."""

    __slots__ = (
        "_cancelled",
        "_correlation_id",
        "_flags",
        "_inputs",
        "_model_name",
        "_model_version",
        "_parameters",
        "_preferred_memory",
        "_release_flags",
        "_request_id",
        "_requested_output_names",
        "_sender",
        "_timeout",
        "_trace",
    )

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: Sequence[Tensor] | None = None,
        requested_output_names: Sequence[str] | None = None,
        model_name: str | None = None,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: Mapping[str, ParameterValue] | None = None,
    ) -> None:
        for argument, value in (
            ("inputs", inputs),
            ("requested_output_names", requested_output_names),
            ("model_name", model_name),
        ):
            if value is None:
                raise TypeError(f"InferenceRequest(): the '{argument}' argument is required")
        for argument, number in (("model_version", model_version), ("flags", flags), ("timeout", timeout)):
            if not isinstance(number, int):
                raise TypeError(f"InferenceRequest(): '{argument}' must be an int, not {type(number).__name__}")
        if correlation_id is None:
            raise TypeError("InferenceRequest(): 'correlation_id' must be an int or a str, not None")
        if not isinstance(correlation_id, int | str):
            raise TritonModelException("Correlation ID must be integer or string")
        for tensor in inputs or []:
            if tensor is None:  # as in Triton, whose C++ layer takes it and then finds no tensor
                raise TritonModelException("InferenceRequest(): an item of 'inputs' is None, not a pb_utils.Tensor")
            if not isinstance(tensor, Tensor):
                raise TypeError(
                    "InferenceRequest(): inputs must be a list of pb_utils.Tensor, found an item of type "
                    f"{type(tensor)!s}"
                )
        self._request_id = text(request_id, "InferenceRequest(): 'request_id'")
        self._correlation_id: int | str = correlation_id
        self._inputs = list(inputs or [])
        self._requested_output_names = texts(requested_output_names, "InferenceRequest(): 'requested_output_names'")
        self._model_name = text(model_name, "InferenceRequest(): 'model_name'")
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._preferred_memory = preferred_memory or PreferredMemory(TRITONSERVER_MEMORY_CPU)
        self._trace = trace or InferenceTrace()
        self._parameters = json.dumps(check_parameters(parameters), separators=(",", ":"))
        self._sender: InferenceResponseSender | None = None
        self._cancelled: Callable[[], bool] = _never
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL

    @classmethod
    def _received(
        cls,
        *,
        request_id: str,
        correlation_id: int | str,
        inputs: list[Tensor],
        requested_output_names: list[str],
        model_name: str,
        model_version: int,
        flags: int,
        timeout: int,
        parameters: str,
        sender: InferenceResponseSender,
        is_cancelled: Callable[[], bool],
    ) -> InferenceRequest:
        """A request naiad hands to ``execute`` (no validation: naiad already did it)."""
        request = cls.__new__(cls)
        request._request_id = request_id
        request._correlation_id = correlation_id
        request._inputs = inputs
        request._requested_output_names = requested_output_names
        request._model_name = model_name
        request._model_version = model_version
        request._flags = flags
        request._timeout = timeout
        request._preferred_memory = _HOST_MEMORY
        request._trace = _NO_TRACE
        request._parameters = parameters
        request._sender = sender
        request._cancelled = is_cancelled
        request._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        return request

    def inputs(self) -> list[Tensor]:
        """Every input tensor of the request (optional inputs only when sent)."""
        return self._inputs

    def request_id(self) -> str:
        """The client's request id, or ``""``."""
        return self._request_id

    def correlation_id(self) -> int | str:
        """The sequence id (``0`` when there is none)."""
        return self._correlation_id

    def flags(self) -> int:
        """Sequence flags: ``TRITONSERVER_REQUEST_FLAG_SEQUENCE_START`` / ``..._END`` bits."""
        return self._flags

    def _rescheduled(self) -> bool:
        return self._release_flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE

    def set_flags(self, flags: int) -> None:
        """Set the sequence flags (for BLS requests)."""
        self._flags = flags

    def timeout(self) -> int:
        """The request timeout in microseconds (0 = none)."""
        return self._timeout

    def parameters(self) -> str:
        """The custom request parameters as a JSON string."""
        return self._parameters

    def requested_output_names(self) -> set[str]:
        """The outputs the client asked for, or every output of the config when it asked for none (a
        set, as Triton's python backend gives it)."""
        return set(self._requested_output_names)

    def trace(self) -> InferenceTrace:
        """The request's trace object."""
        return self._trace

    def get_response_sender(self) -> InferenceResponseSender:
        """The request's response sender (the same object on every call)."""
        sender = self._response_sender()
        sender._taken = True
        return sender

    def _answered_later(self) -> bool:
        """True when the model took this request's sender and has not finished answering with it: it
        may answer after ``execute`` returned."""
        return self._sender is not None and self._sender._taken and not self._sender.closed

    def _response_sender(self) -> InferenceResponseSender:
        """The response sender, for the backend: unlike :meth:`get_response_sender`, not marked as the
        model's to answer with."""
        if self._sender is None:
            raise TritonModelException(
                "this InferenceRequest was built by the model (BLS); only requests received in execute() "
                "have a response sender"
            )
        return self._sender

    def is_cancelled(self) -> bool:
        """True when the client cancelled the request or went away."""
        return self._cancelled()

    def set_release_flags(self, flags: int) -> None:
        """``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``: run this request again once ``execute`` returns
        (models with ``sequence_batching { iterative_sequence: true }``; return ``None`` for it)."""
        if flags not in (TRITONSERVER_REQUEST_RELEASE_ALL, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE):
            raise TritonModelException(f"Unsupported release flags {flags!r}")
        self._release_flags = flags

    def exec(self, decoupled: bool = False) -> InferenceResponse | ResponseIterator:
        """BLS: run this request on ``model_name`` and wait for its response.

        With ``decoupled=True``, an iterator over the responses instead (required for decoupled
        models). Failures come back as a response whose ``has_error()`` is true.
        """
        from naiad_python import bls  # imports this module

        return bls.exec_request(self, decoupled)

    def async_exec(self, decoupled: bool = False) -> asyncio.Future[InferenceResponse | ResponseIterator]:
        """:meth:`exec` from ``async def execute``: sends the request now, returns an awaitable of the result."""
        from naiad_python import bls  # imports this module

        return bls.async_exec_request(self, decoupled)


def _never() -> bool:
    return False
