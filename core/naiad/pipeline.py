"""The response pipeline of a model version: what every response passes on its way to its sink.

Built once when a version loads, from the stages its scheduler and the server contribute, in this
order::

    backend -> output reshape -> implicit state -> ordering -> statistics -> response cache
            -> output options -> sink

Each stage is an object whose :meth:`ResponseStage.bind` wraps the rest of the pipeline once; a
response then costs one call per stage and no allocation. Per-request state lives in the
sender's slots, so the pipeline holds nothing of any request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from naiad.classification import classify
from naiad.errors import NaiadError
from naiad.inference import Deliver, InferenceResponse, RequestedOutput, ResponseEvent, ResponseSender, to_sink
from naiad.reshapes import Reshape, config_reshape
from naiad.tensor import Tensor


class ResponseStage(Protocol):
    """One step of the pipeline."""

    def bind(self, forward: Deliver) -> Deliver:
        """A function that handles an event and passes it (or what it becomes) to ``forward``."""


def build_pipeline(
    stages: Sequence[ResponseStage],
    *,
    batching: bool = False,
    labels: Mapping[str, Sequence[str]] | None = None,
    reshapes: Mapping[str, Reshape] | None = None,
    model_name: str = "",
) -> Deliver:
    """The pipeline running ``stages`` in order, then the output options, then the sink.

    ``batching`` and ``labels`` (output name -> class labels) shape classification outputs.
    ``reshapes`` (output name -> its config ``reshape`` and ``dims``) first bring the outputs a
    backend gives in their reshape form to the dims clients see, as Triton does.
    """
    deliver: Deliver = _apply_output_options(to_sink, batching, labels or {})
    for stage in reversed(stages):
        deliver = stage.bind(deliver)
    if reshapes:
        deliver = _reshape_outputs(deliver, reshapes, 1 if batching else 0, model_name)
    return deliver


def _reshape_outputs(forward: Deliver, reshapes: Mapping[str, Reshape], batch_dims: int, model_name: str) -> Deliver:
    """Outputs with a config reshape go from it to their dims; one that does not fit fails the response."""

    def deliver(sender: ResponseSender, event: ResponseEvent) -> None:
        response = event.response
        if response is not None and response.error is None and response.outputs:
            try:
                response.outputs = [_to_dims(tensor) for tensor in response.outputs]
            except NaiadError as error:  # carried without its traceback, which holds this frame's event
                event = ResponseEvent(InferenceResponse(error=error.with_traceback(None)), event.final)
        forward(sender, event)

    def _to_dims(tensor: Tensor) -> Tensor:
        shapes = reshapes.get(tensor.name)
        if shapes is None:
            return tensor
        reshape, dims = shapes
        try:
            data = config_reshape(tensor.data, reshape, dims, batch_dims)
        except (ValueError, RuntimeError, TypeError, AttributeError):  # a size that does not fit (numpy,
            # torch), or a device array that cannot be reshaped
            raise NaiadError(
                f"model '{model_name}' gave output '{tensor.name}' with shape {list(tensor.shape)}, which does not "
                f"fit its config: reshape {list(reshape)} (the shape the model gives), dims {list(dims)}"
            ) from None
        return Tensor(tensor.name, tensor.datatype, data, tensor.memory, tensor.device_id)

    return deliver


def _apply_output_options(forward: Deliver, batching: bool, labels: Mapping[str, Sequence[str]]) -> Deliver:
    """Outputs asked for as classes become their top-k classes; outputs with a destination are written
    there. A failure (an output type that has no classes, a destination too small) fails the response."""

    def deliver(sender: ResponseSender, event: ResponseEvent) -> None:
        options = sender.output_options
        response = event.response
        if options is not None and response is not None and response.error is None:
            try:
                response.outputs = [_shaped(tensor, options.get(tensor.name)) for tensor in response.outputs]
            except NaiadError as error:  # carried without its traceback, which holds this frame's event
                event = ResponseEvent(InferenceResponse(error=error.with_traceback(None)), event.final)
        forward(sender, event)

    def _shaped(tensor: Tensor, option: RequestedOutput | None) -> Tensor:
        if option is None:
            return tensor
        if option.classification:
            tensor = classify(tensor, option.classification, batching=batching, labels=labels.get(tensor.name, ()))
        if option.destination is not None:
            option.destination.write(tensor)
        return tensor

    return deliver
