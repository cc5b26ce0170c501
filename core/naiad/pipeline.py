"""The response pipeline of a model version: what every response passes on its way to its sink.

Built once when a version loads, from the stages its scheduler and the server contribute, in this
order::

    backend -> implicit state -> ordering -> statistics -> output destinations -> sink

Each stage is an object whose :meth:`ResponseStage.bind` wraps the rest of the pipeline once; a
response then costs one call per stage and no allocation. Per-request state lives in the
sender's slots, so the pipeline holds nothing of any request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from naiad.errors import NaiadError
from naiad.inference import Deliver, InferenceResponse, ResponseEvent, ResponseSender, to_sink


class ResponseStage(Protocol):
    """One step of the pipeline."""

    def bind(self, forward: Deliver) -> Deliver:
        """A function that handles an event and passes it (or what it becomes) to ``forward``."""


def build_pipeline(stages: Sequence[ResponseStage]) -> Deliver:
    """The pipeline running ``stages`` in order, then the output destinations, then the sink."""
    deliver: Deliver = _write_destinations(to_sink)
    for stage in reversed(stages):
        deliver = stage.bind(deliver)
    return deliver


def _write_destinations(forward: Deliver) -> Deliver:
    """Write outputs that asked for a destination there; a failed write fails the response."""

    def deliver(sender: ResponseSender, event: ResponseEvent) -> None:
        destinations = sender.destinations
        response = event.response
        if destinations is not None and response is not None and response.error is None:
            try:
                for tensor in response.outputs:
                    destination = destinations.get(tensor.name)
                    if destination is not None:
                        destination.write(tensor)
            except NaiadError as error:
                event = ResponseEvent(InferenceResponse(error=error), event.final)
        forward(sender, event)

    return deliver
