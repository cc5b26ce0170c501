"""Submitting an inference request from anywhere: a frontend, a backend's thread, a pipeline step.

:meth:`InferenceService.submit` is the one entry point. It takes the model (a name, or a model the
caller already resolved), the inputs and a response sink, and does everything between a decoded
request and the model's scheduler, once: the server-state check, the lookup, the decoupled check,
validation, request parameters, the response cache and admission. It never blocks and needs no
event loop, so it serves the event loop, worker threads and callbacks alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from naiad.cancellation import CancellationToken
from naiad.errors import NaiadError, invalid_arg, unavailable, unsupported
from naiad.inference import (
    SEQUENCE_END,
    SEQUENCE_START,
    InferenceRequest,
    ParameterValue,
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
    ResponseSink,
    Scheduling,
)
from naiad.lifecycle import ModelLifecycle
from naiad.models import ServingModel
from naiad.tensor import Tensor
from naiad.trace_settings import TraceSettings
from naiad.tracing import FrontendTiming, Tracer
from naiad.validation import (
    check_empty_items,
    first_repeated,
    input_already_exists,
    validate_inputs,
    validate_outputs,
    zero_led,
)

SHUTTING_DOWN = "Server not ready: it is shutting down"

# How many times a request follows a model that is reloaded again and again under it.
_RETIRED_RETRIES = 4

# Request parameters the server consumes; they never reach the model. (HTTP's ``binary_data_output``
# is its frontend's: over gRPC, as in Triton, it is a custom parameter like any other.)
SCHEDULING_PARAMETERS = frozenset({"sequence_id", "sequence_start", "sequence_end", "priority", "timeout"})


class InferenceService:
    """Resolves models and admits requests for every caller of one server."""

    def __init__(self, lifecycle: ModelLifecycle, tracer: Tracer | None = None) -> None:
        self.lifecycle = lifecycle
        self.tracer = tracer or Tracer(TraceSettings())
        self.accepting = True  # False once the server is shutting down

    def resolve(self, name: str, version: str | int = "", *, refuse_decoupled: str | None = None) -> ServingModel:
        """The model version that serves ``name`` (``version`` "" or 0: the latest READY one).

        ``refuse_decoupled`` is the error text for a decoupled model when the caller can take only
        one response (each protocol words it its own way); None accepts any model.
        """
        model = self.lifecycle.lookup(name, version)
        if refuse_decoupled is not None and model.signature.decoupled:
            raise unsupported(refuse_decoupled)
        return model

    def submit(
        self,
        model: str | ServingModel,
        inputs: Sequence[Tensor],
        sink: ResponseSink,
        *,
        version: str | int = "",
        outputs: Sequence[RequestedOutput | str] = (),
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        scheduling: Scheduling | None = None,
        refuse_decoupled: str | None = None,
        cancellation: CancellationToken | None = None,
        parent: InferenceRequest | None = None,
        frontend: FrontendTiming | None = None,
    ) -> InferenceRequest:
        """Validate a request and queue it; its responses go to ``sink``.

        Raises :class:`naiad.errors.NaiadError` (nothing is queued then) for a server shutting
        down, an unknown model, a refused decoupled model, an invalid request or a full queue.
        ``parameters`` are a frontend request's: their reserved keys (``sequence_id``, ``priority``,
        ``timeout``, ...) set the request's scheduling and the rest reach the model. An in-process
        caller passes ``scheduling`` instead; every one of its ``parameters`` then reaches the model.
        Pass ``cancellation`` to share a token with the caller; the returned request's
        :meth:`~naiad.inference.InferenceRequest.cancel` cancels it too. ``parent`` is the request
        being served on whose behalf this one is made: the new request extends its lineage, is
        refused (INVALID_ARG) when its model is already in that lineage (a cycle that would wait
        on itself), and is cancelled when the parent is, without cancelling the parent. It is
        admitted while the server shuts down, so that the parent can finish. ``frontend``: the
        timing of the frontend that read the request, for its trace.
        """
        if not self.accepting and parent is None:
            raise unavailable(SHUTTING_DOWN)
        if isinstance(model, str):
            model = self.resolve(model, version, refuse_decoupled=refuse_decoupled)
        lineage = _lineage(parent, model)
        for _ in range(_RETIRED_RETRIES):
            try:
                return self._submit_to(
                    model,
                    inputs,
                    sink,
                    outputs,
                    request_id,
                    parameters,
                    scheduling,
                    cancellation,
                    parent,
                    lineage,
                    frontend,
                )
            except NaiadError:
                # A version unpublished (reload, unload) between the lookup and the admission refuses;
                # the request goes to what serves the model now, or gets Triton's not-found answer.
                replacement = self.lifecycle.replacement(model)
                if replacement is model:
                    raise
                if refuse_decoupled is not None and replacement.signature.decoupled:
                    raise unsupported(refuse_decoupled) from None
                model = replacement
        return self._submit_to(
            model, inputs, sink, outputs, request_id, parameters, scheduling, cancellation, parent, lineage, frontend
        )

    def _submit_to(
        self,
        model: ServingModel,
        inputs: Sequence[Tensor],
        sink: ResponseSink,
        outputs: Sequence[RequestedOutput | str],
        request_id: str,
        parameters: Mapping[str, ParameterValue] | None,
        scheduling: Scheduling | None,
        cancellation: CancellationToken | None,
        parent: InferenceRequest | None,
        lineage: tuple[str, ...],
        frontend: FrontendTiming | None,
    ) -> InferenceRequest:
        """Validate and admit a request to one resolved version."""
        signature = model.signature
        if outputs:
            requested = _requested_outputs(outputs)
            validate_outputs(model.name, signature, list(requested))
        else:
            requested = dict(model.default_outputs)
        by_name = {tensor.name: tensor for tensor in inputs}
        if len(by_name) < len(inputs):  # in-process callers (BLS); the frontends refuse it as they read
            raise input_already_exists(first_repeated([tensor.name for tensor in inputs]), request_id)
        batch_size = validate_inputs(model.name, signature, inputs, request_id)
        if zero_led(signature, inputs):
            check_empty_items(model.name, signature, inputs, batch_size, request_id)
        if signature.reshapes:  # the model gets them in their config reshape, as in Triton
            by_name = signature.model_shaped(by_name)
        sender = ResponseSender(sink, model.pipeline, cancellation)
        if outputs:
            options = {name: out for name, out in requested.items() if out.classification or out.destination}
            if options:
                sender.output_options = options
        request = InferenceRequest(
            model_name=model.name,
            model_version=model.version,
            inputs=by_name,
            requested_outputs=requested,
            sender=sender,
            id=request_id,
            batch_size=batch_size,
            lineage=lineage,
        )
        if scheduling is not None:
            request.parameters = dict(parameters) if parameters else {}
            _apply_scheduling(request, _checked(scheduling))
        elif parameters:
            request.parameters = _custom_parameters(parameters)
            _apply_scheduling(request, _scheduling_from_parameters(parameters))
        cache = model.cache
        if cache is not None and cache.answer(request):
            return request  # answered from the response cache; the model never sees it
        if self.tracer.active or (parent is not None and parent.sender.trace is not None):
            sender.trace = self.tracer.sample(request, parent, frontend)
        if parent is None:
            model.admit(request)
            return request
        link = _ParentLink(sender, parent.cancellation)
        try:
            model.admit(request)
        except BaseException:
            link.unlink()
            raise
        return request


def _lineage(parent: InferenceRequest | None, target: ServingModel) -> tuple[str, ...]:
    """The lineage of a request for ``target`` made on behalf of ``parent``. A cycle back to a model
    whose every instance waits in it is refused: nothing could serve it. One that leaves an instance
    free runs (a model with two instances calling itself, as Triton's own BLS tests do)."""
    if parent is None:
        return ()
    lineage = (*parent.lineage, parent.model_name)
    name = target.name
    waiting = lineage.count(name)
    if waiting and waiting >= len(target.instances):
        chain = " -> ".join(f"'{step}'" for step in (*lineage[lineage.index(name) :], name))
        raise invalid_arg(
            f"request cycle: model {chain}; every instance of model '{name}' ({len(target.instances)}) is "
            "waiting for this request's result, so none can serve it. A model must not send requests, "
            "directly or through other models, to a model whose every instance is waiting for it"
        )
    return lineage


class _ParentLink:
    """Cancels a child request with its parent until the child's final response passes."""

    __slots__ = ("_cancel", "_parent", "_sink")

    def __init__(self, sender: ResponseSender, parent: CancellationToken) -> None:
        self._sink = sender.sink
        self._parent = parent
        self._cancel = sender.cancellation.cancel
        sender.sink = self
        parent.add_callback(self._cancel)

    def deliver(self, event: ResponseEvent) -> None:
        if event.final:
            self.unlink()
        self._sink.deliver(event)

    def unlink(self) -> None:
        """Stop following the parent's cancellation."""
        self._parent.remove_callback(self._cancel)


def _requested_outputs(outputs: Sequence[RequestedOutput | str]) -> dict[str, RequestedOutput]:
    """The outputs asked for, by name (a name asked twice counts once)."""
    requested: dict[str, RequestedOutput] = {}
    for output in outputs:
        if isinstance(output, str):
            output = RequestedOutput(output)
        requested.setdefault(output.name, output)
    return requested


def _custom_parameters(parameters: Mapping[str, ParameterValue]) -> dict[str, ParameterValue]:
    """A frontend request's parameters less the scheduling ones the server consumes."""
    custom = {}
    for key, value in parameters.items():
        if key.startswith("triton_"):
            raise invalid_arg(
                "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
            )
        if key not in SCHEDULING_PARAMETERS:
            custom[key] = value
    return custom


def _scheduling_from_parameters(parameters: Mapping[str, ParameterValue]) -> Scheduling:
    """The scheduling settings a frontend request gives in its reserved parameters."""
    sequence_id = parameters.get("sequence_id", 0)
    if isinstance(sequence_id, bool) or not isinstance(sequence_id, int | str):
        raise invalid_arg("parameter 'sequence_id' must be an unsigned integer or a string")
    flags = (SEQUENCE_START if parameters.get("sequence_start") is True else 0) | (
        SEQUENCE_END if parameters.get("sequence_end") is True else 0
    )
    return Scheduling(sequence_id, flags, _unsigned(parameters, "priority"), _unsigned(parameters, "timeout"))


def _checked(scheduling: Scheduling) -> Scheduling:
    """An in-process caller's scheduling, refused (INVALID_ARG) unless every field has its type."""
    if isinstance(scheduling.correlation_id, bool) or not isinstance(scheduling.correlation_id, int | str):
        raise invalid_arg(
            f"request correlation id must be an unsigned integer or a string, got {scheduling.correlation_id!r}"
        )
    for name, value in (
        ("flags", scheduling.flags),
        ("priority", scheduling.priority),
        ("timeout", scheduling.timeout_us),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise invalid_arg(f"request {name} must be an unsigned integer, got {value!r}")
    return scheduling


def _apply_scheduling(request: InferenceRequest, scheduling: Scheduling) -> None:
    request.correlation_id = scheduling.correlation_id
    request.flags = scheduling.flags
    request.priority = scheduling.priority
    request.timeout_us = scheduling.timeout_us


def _unsigned(parameters: Mapping[str, ParameterValue], key: str) -> int:
    value = parameters.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_arg(f"parameter '{key}' must be an unsigned integer, got {value!r}")
    return value
