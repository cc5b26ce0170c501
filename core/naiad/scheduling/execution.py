"""Running one batch on one instance with the execution contract enforced."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

from naiad.backend import ModelInstance
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import InferenceRequest, InferenceResponse

logger = logging.getLogger(__name__)


def execute_batch(instance: ModelInstance, requests: Sequence[InferenceRequest], *, decoupled: bool) -> None:
    """Execute ``requests`` on ``instance``; no request is ever left without an answer.

    An exception escaping the backend fails every request it had not finished. A
    non-decoupled request still open when ``execute`` returns gets an error naming the
    model, because its client would otherwise wait forever.
    """
    try:
        instance.execute(requests)
    except Exception as error:
        model = requests[0].model_name
        logger.exception("model '%s' version %s failed to execute a batch", model, requests[0].model_version)
        message = error.message if isinstance(error, NaiadError) else f"{type(error).__name__}: {error}"
        code = error.code if isinstance(error, NaiadError) else ErrorCode.INTERNAL
        _fail_open(requests, NaiadError(f"failed to execute model '{model}': {message}", code))
        return
    if not decoupled:
        _fail_open(
            requests,
            NaiadError(
                f"model '{requests[0].model_name}' returned from execute without answering the request",
                ErrorCode.INTERNAL,
            ),
        )


def _fail_open(requests: Sequence[InferenceRequest], error: NaiadError) -> None:
    for request in requests:
        if not request.sender.closed:
            with contextlib.suppress(NaiadError):  # closed concurrently by a backend thread
                request.sender.send(InferenceResponse(error=error), final=True)
