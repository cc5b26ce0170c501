"""What Triton's python backend refuses in a batch before the model's ``execute`` sees it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from naiad.backend import ErrorCode, InferenceRequest, InferenceResponse, NaiadError, request_prefix


def batch_refusal(requests: Sequence[InferenceRequest], batching: bool) -> NaiadError | None:
    """The error that fails the whole batch, or None to run it.

    A batching model's batch size is read from each request's first input, so a request with no
    inputs (every input of the model optional) fails the batch with Triton's INVALID_ARG.
    """
    if batching:
        for request in requests:
            if not request.inputs:
                return NaiadError(
                    f"{request_prefix(request.id)}out of bounds index 0: request has 0 inputs", ErrorCode.INVALID_ARG
                )
    return None


def fail_requests(requests: Iterable[InferenceRequest], error: NaiadError) -> None:
    """Answer each request not yet answered with ``error``, as its final response."""
    for request in requests:
        if not request.sender.closed:
            request.sender.send(InferenceResponse(error=error), final=True)
