"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with an HTTP status."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from naiad.backend import ErrorCode, NaiadError

_STATUS = {
    ErrorCode.INVALID_ARG: 400,
    ErrorCode.UNSUPPORTED: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.CANCELLED: 499,
    ErrorCode.UNAVAILABLE: 503,
}


class OpenAIError(Exception):
    """A request the API refuses or could not serve, answered with ``status``."""

    def __init__(self, message: str, status: int = 400, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The error object OpenAI's clients parse."""
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


def invalid(message: str, param: str | None = None) -> OpenAIError:
    """A 400: the request is malformed or asks for something the model cannot do."""
    return OpenAIError(message, 400, param=param)


def from_naiad(error: NaiadError) -> OpenAIError:
    """A model's or the server's error, with the status its code calls for."""
    return OpenAIError(error.message, _STATUS.get(error.code, 500))
