"""Error code -> HTTP status, as Triton maps them."""

from __future__ import annotations

from naiad.errors import ErrorCode

_STATUS = {
    ErrorCode.INTERNAL: 500,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNSUPPORTED: 501,
    ErrorCode.INVALID_ARG: 400,
    ErrorCode.ALREADY_EXISTS: 400,
    ErrorCode.CANCELLED: 400,
    ErrorCode.UNKNOWN: 400,
}


def http_status(code: ErrorCode) -> int:
    """The HTTP status Triton answers for an error code."""
    return _STATUS[code]
