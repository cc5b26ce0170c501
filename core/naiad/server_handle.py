"""What a backend may ask of the server it runs in: run requests, check and manage models, metrics.

Backends get the handle in every context (``context.server``). From a worker thread,
:meth:`ServerHandle.infer` runs a request on another model and blocks for its response (Triton's
BLS); on the event loop, :meth:`ServerHandle.infer_async` awaits it; :meth:`ServerHandle.submit`
takes any sink (:mod:`naiad.sinks`) for streaming or callbacks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence

from naiad.cancellation import CancellationToken
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import (
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    RequestedOutput,
    ResponseSink,
    Scheduling,
)
from naiad.lifecycle import requested_config, require_explicit_control
from naiad.metrics.custom import CustomMetrics
from naiad.models import ServingModel
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.service import InferenceService
from naiad.sinks import BlockingSink, LoopInbox, LoopSink, single_response
from naiad.tensor import Tensor


def decoupled_refusal(name: str) -> str:
    """Why a caller that takes one response cannot use a decoupled model."""
    return (
        f"model '{name}' uses the decoupled transaction policy and may send any number of responses; "
        "submit it with a sink that takes a stream of responses instead"
    )


class ServerHandle:
    """The server, as its backends see it."""

    def __init__(
        self,
        service: InferenceService,
        inbox: LoopInbox,
        metrics: CustomMetrics,
        *,
        explicit_model_control: bool = False,
    ) -> None:
        self._service = service
        self._inbox = inbox
        self._metrics = metrics
        self._explicit_model_control = explicit_model_control

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The server's event loop: where ``async def`` instances and async engines run."""
        return self._inbox.loop

    @property
    def inbox(self) -> LoopInbox:
        """Hands response events to the server's loop (for :class:`~naiad.sinks.LoopSink`)."""
        return self._inbox

    @property
    def metrics(self) -> CustomMetrics:
        """Custom metric families, exported on the metrics endpoint."""
        return self._metrics

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
        cancellation: CancellationToken | None = None,
        parent: InferenceRequest | None = None,
        refuse_decoupled: str | None = None,
    ) -> InferenceRequest:
        """Queue a request on ``model`` (a name, or a version :meth:`resolve` gave); its responses go to
        ``sink`` (see :meth:`InferenceService.submit`).

        Without ``scheduling``, the reserved keys of ``parameters`` (``sequence_id``, ``priority``,
        ``timeout``, ...) set the request's sequence, priority and timeout, as a frontend request's do;
        with it, every parameter reaches the model as it is.
        """
        return self._service.submit(
            model,
            inputs,
            sink,
            version=version,
            outputs=outputs,
            request_id=request_id,
            parameters=parameters,
            scheduling=scheduling,
            cancellation=cancellation,
            parent=parent,
            refuse_decoupled=refuse_decoupled,
        )

    def infer(
        self,
        model: str,
        inputs: Sequence[Tensor],
        *,
        version: str | int = "",
        outputs: Sequence[RequestedOutput | str] = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        scheduling: Scheduling | None = None,
        timeout: float | None = None,
        cancellation: CancellationToken | None = None,
        parent: InferenceRequest | None = None,
    ) -> InferenceResponse:
        """Run one request on a non-decoupled model and wait for its response; call from a thread.

        Raises the response's error; after ``timeout`` seconds the request is cancelled and
        UNAVAILABLE raised.
        """
        if threading.get_ident() == self._inbox.loop_thread:
            raise NaiadError(
                f"ServerHandle.infer('{model}') would block the server's event loop; use infer_async there",
                ErrorCode.INTERNAL,
            )
        sink = BlockingSink()
        request = self._submit_single(
            model, inputs, sink, version, outputs, parameters, scheduling, cancellation, parent
        )
        try:
            return sink.response(timeout, model=model)
        except NaiadError:
            request.cancel()
            raise

    async def infer_async(
        self,
        model: str,
        inputs: Sequence[Tensor],
        *,
        version: str | int = "",
        outputs: Sequence[RequestedOutput | str] = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        scheduling: Scheduling | None = None,
        cancellation: CancellationToken | None = None,
        parent: InferenceRequest | None = None,
    ) -> InferenceResponse:
        """:meth:`infer` for coroutines on the server's loop; cancelling the coroutine cancels the request."""
        sink = LoopSink(self._inbox)
        request = self._submit_single(
            model, inputs, sink, version, outputs, parameters, scheduling, cancellation, parent
        )
        try:
            return single_response(await sink.next_event(), model)
        except asyncio.CancelledError:
            request.cancel()
            raise

    def _submit_single(
        self,
        model: str,
        inputs: Sequence[Tensor],
        sink: ResponseSink,
        version: str | int,
        outputs: Sequence[RequestedOutput | str],
        parameters: Mapping[str, ParameterValue] | None,
        scheduling: Scheduling | None,
        cancellation: CancellationToken | None,
        parent: InferenceRequest | None,
    ) -> InferenceRequest:
        """Queue a request whose caller takes exactly one response (a decoupled model is refused)."""
        return self._service.submit(
            model,
            inputs,
            sink,
            version=version,
            outputs=outputs,
            parameters=parameters,
            scheduling=scheduling,
            refuse_decoupled=decoupled_refusal(model),
            cancellation=cancellation,
            parent=parent,
        )

    def resolve(self, name: str, version: str | int = "") -> ServingModel:
        """The READY version that serves ``name`` (the latest unless ``version`` is given), with its final
        config; NOT_FOUND or UNAVAILABLE with Triton's text otherwise."""
        return self._service.resolve(name, version)

    def model_names(self) -> set[str]:
        """Every model the server knows of, loaded or not (failed and unloaded ones included)."""
        return {record.name for record in self._service.lifecycle.records()}

    def model_ready(self, name: str, version: str | int = "") -> bool:
        """Whether the model (version) is READY to serve."""
        try:
            self._service.lifecycle.lookup(name, version)
        except NaiadError:
            return False
        return True

    def load_failure(self, name: str) -> str | None:
        """Why the last load of ``name`` failed (its versions' reasons, as Triton lists them), or None."""
        return self._service.lifecycle.load_failure(name)

    def load_model(
        self, name: str, config: ModelConfig | str | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        """Load or reload a model (``--model-control-mode=explicit`` only), with ``config`` (a config, or
        Triton's JSON of one) instead of its own and ``files`` (``file:<path>`` keys) as a load request
        carries them; a JSON config that is not one is refused as the repository API refuses it. Blocks,
        so call from a thread."""
        require_explicit_control(self._explicit_model_control)
        if isinstance(config, str):
            config = requested_config(name, config)
        self._service.lifecycle.load_model(name, config, files or None)

    def unload_model(self, name: str, *, unload_dependents: bool = False) -> None:
        """Unload every version of a model (``--model-control-mode=explicit`` only), with
        ``unload_dependents`` the models it needs that nothing else needs too; blocks until done."""
        require_explicit_control(self._explicit_model_control)
        self._service.lifecycle.unload_model(name, unload_dependents=unload_dependents)
