"""ONNX Runtime exceptions as naiad errors, worded as Triton's onnxruntime backend words them."""

from __future__ import annotations

import re

from naiad.backend import ErrorCode, NaiadError

# ONNX Runtime's Python exceptions read "[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : <message>".
_ORT_MESSAGE = re.compile(r"^\[ONNXRuntimeError\] : (\d+) : \w+ : (.*)$", re.DOTALL)


def ort_error(error: BaseException) -> NaiadError:
    """``onnx runtime error <code>: <message>`` (INTERNAL), Triton's text for any ONNX Runtime failure."""
    if isinstance(error, NaiadError):
        return error
    match = _ORT_MESSAGE.match(str(error).strip())
    if match:
        return NaiadError(f"onnx runtime error {match.group(1)}: {match.group(2)}", ErrorCode.INTERNAL)
    return NaiadError(f"onnx runtime error: {type(error).__name__}: {error}", ErrorCode.INTERNAL)
