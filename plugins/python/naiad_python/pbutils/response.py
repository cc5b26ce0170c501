"""``pb_utils.InferenceResponse`` and ``pb_utils.InferenceResponseSender``.

The sender enforces Triton's rules (flags, one response for non-decoupled models, nothing
after the final flag) and hands what passes to a ``deliver`` callback that the backend
provides; this module knows nothing about naiad's core types.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from naiad_python.pbutils.errors import TritonError, TritonModelException
from naiad_python.pbutils.tensor import Tensor

_log = logging.getLogger("naiad.python")

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1

ParameterValue = bool | int | str
Deliver = Callable[["InferenceResponse | None", bool], None]


def check_parameters(parameters: object) -> dict[str, ParameterValue]:
    """Validate request/response parameters as Triton does: ``str`` keys, bool/int/str values."""
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise TritonModelException(f"Expect dict, got {type(parameters)!s}")
    checked: dict[str, ParameterValue] = {}
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"Expect parameters keys to have type str, found type {type(key)!s}")
        if not isinstance(value, bool | int | str):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)!s}"
            )
        checked[key] = value
    return checked


class InferenceResponse:
    """The answer to one request: output tensors, or an error, plus optional parameters."""

    __slots__ = ("_backend_failure", "_error", "_output_tensors", "_parameters")

    def __init__(
        self,
        output_tensors: Sequence[Tensor] = (),
        error: TritonError | None = None,
        parameters: Mapping[str, ParameterValue] | None = None,
    ) -> None:
        if output_tensors is None:
            raise TypeError("InferenceResponse(): output_tensors must be a list of pb_utils.Tensor, not None")
        tensors = list(output_tensors)
        for tensor in tensors:
            if tensor is None:  # as in Triton, whose C++ layer takes it and then finds no tensor
                raise TritonModelException(
                    "InferenceResponse(): an item of output_tensors is None, not a pb_utils.Tensor"
                )
            if not isinstance(tensor, Tensor):
                raise TypeError(
                    "InferenceResponse(): output_tensors must be a list of pb_utils.Tensor, found an item "
                    f"of type {type(tensor)!s}"
                )
        if error is not None and not isinstance(error, TritonError):
            raise TypeError(f"InferenceResponse(): error must be a pb_utils.TritonError, not {type(error)!s}")
        self._output_tensors = tensors
        self._error = error
        self._parameters = check_parameters(parameters)
        self._backend_failure = False  # the backend's own error (execute raised), not the model's answer

    def output_tensors(self) -> list[Tensor]:
        """The output tensors, in the order given."""
        return self._output_tensors

    def has_error(self) -> bool:
        """True when the response carries an error."""
        return self._error is not None

    def error(self) -> TritonError | None:
        """The error, or ``None``."""
        return self._error

    def parameters(self) -> str:
        """The response parameters as a JSON string."""
        return json.dumps(self._parameters, separators=(",", ":"))

    def _parameter_dict(self) -> dict[str, ParameterValue]:
        return self._parameters


class InferenceResponseSender:
    """Sends a request's responses, from any thread: ``request.get_response_sender()``.

    Decoupled models send any number of responses and then exactly one
    ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL``. Non-decoupled models send one response;
    it is delivered once the final flag arrives (in the same call or a later one) or, at
    the latest, when ``execute`` returns.
    """

    __slots__ = ("_closed", "_decoupled", "_deliver", "_held", "_is_cancelled", "_lock", "_sent", "_taken")

    def __init__(self, deliver: Deliver, *, decoupled: bool, is_cancelled: Callable[[], bool]) -> None:
        self._deliver = deliver
        self._decoupled = decoupled
        self._is_cancelled = is_cancelled
        self._lock = threading.Lock()
        self._closed = False
        self._sent = 0
        self._held: InferenceResponse | None = None
        self._taken = False  # the model asked for this sender: it may answer after execute returned

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        """Send ``response`` and/or the final flag (``TRITONSERVER_RESPONSE_COMPLETE_FINAL``)."""
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero."
            )
        if response is not None and not isinstance(response, InferenceResponse):
            raise TypeError(f"send(): response must be a pb_utils.InferenceResponse, not {type(response)!s}")
        final = flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL
        with self._lock:
            self._check(response, final)
            if self._decoupled:
                self._deliver(response, final)
            elif not final:
                self._held = response
            else:
                self._deliver(response if response is not None else self._held, True)
                self._held = None
            self._record(final)

    def is_cancelled(self) -> bool:
        """True when the client cancelled the request or went away."""
        return self._is_cancelled()

    # -- used by the backend -----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the final flag went out."""
        return self._closed

    def _check(self, response: InferenceResponse | None, final: bool) -> None:
        if not self._decoupled:
            if response is not None and self._sent > 0:
                raise TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send more than one response."
                )
            if response is None and final and self._sent == 0:
                raise TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send complete final before sending a response."
                )
        if self._closed:
            raise TritonModelException("Unable to send response. Response sender has been closed.")

    def _record(self, final: bool) -> None:
        if final:
            self._closed = True
        self._sent += 1

    def _check_returned(self, response: InferenceResponse) -> None:
        """Raise if ``response``, returned from ``execute``, may not be sent (already answered)."""
        with self._lock:
            self._check(response, True)

    def _send_returned(self, response: InferenceResponse) -> None:
        """Deliver a response returned from ``execute`` as the request's final response."""
        with self._lock:
            self._check(response, True)
            self._deliver(response, True)
            self._record(True)

    def _finish(self) -> bool:
        """After a non-decoupled ``execute``: deliver a response still waiting for its final flag.

        Returns False when the request got no response at all (the caller answers it).
        """
        with self._lock:
            if self._closed:
                return True
            if self._held is None:
                return False
            self._deliver(self._held, True)
            self._held = None
            self._record(True)
            return True

    def _fail(self, error: TritonError) -> None:
        """Close the sender with an error response unless it is already closed; a non-decoupled
        response already sent (waiting for its final flag) goes out instead, as in Triton, where
        the client has it before the error comes."""
        with self._lock:
            if self._closed:
                return
            if self._held is not None:
                _log.warning(
                    "a response was already sent for this request; the error that followed is not: %s",
                    error.message(),
                )
                response, self._held = self._held, None
            else:
                response = InferenceResponse(error=error)
                response._backend_failure = True
            self._deliver(response, True)
            self._record(True)
