"""The one exception type naiad raises across layers, with protocol-neutral codes.

Frontends map :class:`ErrorCode` to their own statuses (an HTTP status, a gRPC code)
in one table each; nothing below the frontends knows about HTTP or gRPC.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.Enum):
    """Triton's server error codes (``TRITONSERVER_Error_Code``)."""

    UNKNOWN = "UNKNOWN"
    INTERNAL = "INTERNAL"
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARG = "INVALID_ARG"
    UNAVAILABLE = "UNAVAILABLE"
    UNSUPPORTED = "UNSUPPORTED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    CANCELLED = "CANCELLED"


class NaiadError(Exception):
    """An error with a code the frontends translate and a message meant for the client."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __repr__(self) -> str:
        return f"NaiadError({self.message!r}, {self.code.name})"

    def as_status_text(self) -> str:
        """The error as Triton writes a status (``Status::AsString``): ``"Internal: <message>"``."""
        return f"{_STATUS_NAMES[self.code]}: {self.message}"


_STATUS_NAMES = {
    ErrorCode.UNKNOWN: "Unknown",
    ErrorCode.INTERNAL: "Internal",
    ErrorCode.NOT_FOUND: "Not found",
    ErrorCode.INVALID_ARG: "Invalid argument",
    ErrorCode.UNAVAILABLE: "Unavailable",
    ErrorCode.UNSUPPORTED: "Unsupported",
    ErrorCode.ALREADY_EXISTS: "Already exists",
    ErrorCode.CANCELLED: "Cancelled",
}


class ByteSizeMismatch(NaiadError):
    """An input whose data is not the size its shape and datatype call for (INVALID_ARG). Triton
    checks sizes after everything else about a request, so the frontends hold this one back."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.INVALID_ARG)


def invalid_arg(message: str) -> NaiadError:
    """An INVALID_ARG error: the client sent something the model cannot take."""
    return NaiadError(message, ErrorCode.INVALID_ARG)


def not_found(message: str) -> NaiadError:
    """A NOT_FOUND error: the named model, version or resource does not exist."""
    return NaiadError(message, ErrorCode.NOT_FOUND)


def unavailable(message: str) -> NaiadError:
    """An UNAVAILABLE error: the target exists but cannot serve right now."""
    return NaiadError(message, ErrorCode.UNAVAILABLE)


def request_prefix(request_id: str) -> str:
    """Triton's ``[request id: ...]`` prefix of the messages that refuse a request."""
    return f"[request id: {request_id or '<id_unknown>'}] "


def unsupported(message: str) -> NaiadError:
    """An UNSUPPORTED error: the request asks for something this server or model does not do."""
    return NaiadError(message, ErrorCode.UNSUPPORTED)
