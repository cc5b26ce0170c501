"""Error code -> HTTP status and error response, as Triton maps and writes them."""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

from naiad.errors import ErrorCode, NaiadError

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


def error_response(error: NaiadError) -> Response:
    """Triton's error body ``{"error": "..."}`` with the status for the error's code."""
    return JSONResponse({"error": error.message}, status_code=http_status(error.code))
