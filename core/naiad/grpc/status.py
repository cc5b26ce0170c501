"""Error code -> gRPC status code, as Triton maps them (protocol-grpc.md §6)."""

from __future__ import annotations

import grpc  # type: ignore[import-untyped,unused-ignore]

from naiad.errors import ErrorCode

_STATUS = {
    ErrorCode.UNKNOWN: grpc.StatusCode.UNKNOWN,
    ErrorCode.INTERNAL: grpc.StatusCode.INTERNAL,
    ErrorCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorCode.INVALID_ARG: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
    ErrorCode.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    ErrorCode.CANCELLED: grpc.StatusCode.CANCELLED,
}


def grpc_status(code: ErrorCode) -> grpc.StatusCode:
    """The gRPC status Triton answers for an error code."""
    return _STATUS[code]
