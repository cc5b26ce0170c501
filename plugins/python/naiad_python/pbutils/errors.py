"""``pb_utils.TritonError`` and ``pb_utils.TritonModelException``.

``TritonError`` is a *value* a model puts in an ``InferenceResponse`` (it is not raised);
its code picks the status the client gets. ``TritonModelException`` is what the
``pb_utils`` API raises when a model misuses it (for example a second send on a closed
response sender), exactly like Triton's ``c_python_backend_utils.TritonModelException``.
"""

from __future__ import annotations

import enum

from naiad_python.pbutils.text import text


class ErrorCode(enum.IntEnum):
    """Triton's ``TRITONSERVER_Error_Code`` values, exposed as ``TritonError.<NAME>``."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7


class TritonError:
    """An error to return to the client: ``InferenceResponse(error=TritonError(msg, code))``."""

    __slots__ = ("_code", "_message")

    UNKNOWN = ErrorCode.UNKNOWN
    INTERNAL = ErrorCode.INTERNAL
    NOT_FOUND = ErrorCode.NOT_FOUND
    INVALID_ARG = ErrorCode.INVALID_ARG
    UNAVAILABLE = ErrorCode.UNAVAILABLE
    UNSUPPORTED = ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = ErrorCode.ALREADY_EXISTS
    CANCELLED = ErrorCode.CANCELLED

    def __init__(self, message: str, code: int = ErrorCode.INTERNAL) -> None:
        try:
            self._code = ErrorCode(code)
        except ValueError:
            raise TypeError(
                f"TritonError(): unknown error code {code!r}; use one of TritonError.UNKNOWN, INTERNAL, "
                "NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED"
            ) from None
        self._message = text(message, "TritonError(): 'message'")

    def message(self) -> str:
        """The error message sent to the client."""
        return self._message

    def code(self) -> ErrorCode:
        """The error code (``TritonError.INTERNAL`` unless given)."""
        return self._code

    def __str__(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, TritonError.{self._code.name})"


class TritonModelException(Exception):
    """Raised by the ``pb_utils`` API on misuse; models may raise it too."""

    def message(self) -> str:
        """The exception message (Triton's accessor)."""
        return str(self)
