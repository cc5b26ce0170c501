"""Error code -> gRPC status code, as Triton maps them (protocol-grpc.md §6), and error texts cut
to what a trailer can carry."""

from __future__ import annotations

from typing import Any

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

MAX_DETAILS_BYTES = 4096
"""Longest error text sent, as percent-encoded in the ``grpc-message`` trailer: clients refuse
trailers over 8 KiB (gRPC's default metadata limit) and then report only "Stream removed"."""

# Bytes gRPC sends as they are in grpc-message; every other byte becomes %XX.
_PLAIN = bytes(byte for byte in range(0x20, 0x7F) if byte != ord("%"))


def grpc_status(code: ErrorCode) -> grpc.StatusCode:
    """The gRPC status Triton answers for an error code."""
    return _STATUS[code]


def fail(context: Any, code: grpc.StatusCode, details: str) -> None:
    """End the call with ``code`` once the handler returns (no exception, so nothing the handler
    holds outlives the call in a traceback)."""
    context.set_code(code)
    context.set_details(cut_details(details))


def cut_details(text: str) -> str:
    """``text``, or as much of it as fits in :data:`MAX_DETAILS_BYTES` with a note that it was cut."""
    if _encoded_size(text) <= MAX_DETAILS_BYTES:
        return text
    low, high = 0, min(len(text), MAX_DETAILS_BYTES)  # every character costs at least one byte
    while low < high:  # the longest prefix that fits with its note
        middle = (low + high + 1) // 2
        if _encoded_size(_with_note(text, middle)) <= MAX_DETAILS_BYTES:
            low = middle
        else:
            high = middle - 1
    return _with_note(text, low)


def _with_note(text: str, kept: int) -> str:
    return f"{text[:kept]}... [error message cut: {len(text) - kept} more characters]"


def _encoded_size(text: str) -> int:
    encoded = text.encode("utf-8", "replace")
    return len(encoded) + 2 * len(encoded.translate(None, _PLAIN))
