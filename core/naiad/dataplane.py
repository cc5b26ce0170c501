"""The protocol-neutral data plane behind every frontend.

HTTP and gRPC decode their wire formats, call these methods, and encode what comes back; every
behaviour (lookups, validation, parameters, scheduling) is written once, here or in the
:class:`~naiad.service.InferenceService` that admits requests.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from naiad.backend_model import ModelInstance
from naiad.errors import NaiadError, invalid_arg, unsupported
from naiad.header_forwarding import HeaderForwarding
from naiad.inference import (
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    RequestedOutput,
    ResponseEvent,
    Scheduling,
)
from naiad.lifecycle import ModelLifecycle, requested_config, require_explicit_control
from naiad.logs import LogControl
from naiad.models import ModelState, ServingModel
from naiad.service import InferenceService
from naiad.shared_memory import SharedMemoryRegistry
from naiad.sinks import LoopInbox, LoopSink, single_response
from naiad.tensor import Tensor
from naiad.trace_settings import Change
from naiad.tracing import FrontendTiming

logger = logging.getLogger(__name__)

SERVER_NAME = "triton"

_EXTENSIONS_BEFORE_SHARED_MEMORY = (
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
)
_EXTENSIONS_AFTER_SHARED_MEMORY = ("binary_tensor_data", "parameters")

_READINESS_TIMEOUT_S = 5.0  # an instance's is_ready() that takes longer counts as not ready


class ServerState(enum.Enum):
    """Whether the server takes new work."""

    STARTING = "STARTING"
    READY = "READY"
    EXITING = "EXITING"


def refuse_named_repository(repository_name: str) -> None:
    """Triton serves its repositories as one: a load, an unload or (over gRPC) an index that names a
    repository is refused, UNSUPPORTED, before anything else about it is read."""
    if repository_name:
        raise unsupported("'repository_name' specification is not supported")


class DataPlane:
    """Health, metadata, config and inference for every frontend."""

    def __init__(
        self,
        service: InferenceService,
        inbox: LoopInbox,
        version: str,
        *,
        strict_readiness: bool = True,
        logs: LogControl | None = None,
        statistics: bool = True,
        explicit_model_control: bool = False,
        name: str = SERVER_NAME,
    ) -> None:
        self.service = service
        self.name = name
        self.http_headers: HeaderForwarding | None = None  # --http-header-forward-pattern
        self.grpc_headers: HeaderForwarding | None = None  # --grpc-header-forward-pattern
        self.lifecycle: ModelLifecycle = service.lifecycle
        self.inbox = inbox
        self.explicit_model_control = explicit_model_control
        self.version = version
        self.strict_readiness = strict_readiness
        self.logs = logs or LogControl()
        self.statistics = statistics
        self.shared_memory = SharedMemoryRegistry()
        self._state = ServerState.STARTING
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight; False if ``timeout`` seconds passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def state(self) -> ServerState:
        return self._state

    @state.setter
    def state(self, state: ServerState) -> None:
        self._state = state
        self.service.accepting = state is not ServerState.EXITING

    @property
    def in_flight(self) -> int:
        """How many frontend requests are unfinished."""
        return self._in_flight

    def enter(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()

    # -- health and metadata -----------------------------------------------------------------

    def ready(self) -> bool:
        if self.state is not ServerState.READY:
            return False
        return not self.strict_readiness or self.lifecycle.all_ready()

    async def model_ready(self, name: str, version: str = "") -> bool:
        """READY and every instance's ``is_ready()`` true; sync checks run off the event loop."""
        try:
            model = self.lifecycle.lookup(name, version)
        except NaiadError:
            return False
        if not model.scheduler.ready():
            return False
        for runner in model.instances:
            if not await instance_ready(runner.instance):
                return False
        return True

    def server_metadata(self) -> dict[str, Any]:
        """Triton's server metadata; its extensions in Triton's order (CUDA shared memory listed without
        a GPU too, as Triton's CPU build lists it: a registration then says why it cannot be done)."""
        extensions = [*_EXTENSIONS_BEFORE_SHARED_MEMORY, "cuda_shared_memory", *_EXTENSIONS_AFTER_SHARED_MEMORY]
        extensions += ["statistics", "trace", "logging"] if self.statistics else ["trace", "logging"]
        return {"name": self.name, "version": self.version, "extensions": extensions}

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        model = self.lifecycle.lookup(name, version)
        metadata = model.metadata()
        if not version:
            metadata["versions"] = [str(v.version) for v in self.lifecycle.ready_versions(name)]
        return metadata

    def model_config_json(self, name: str, version: str = "") -> str:
        return self.lifecycle.lookup(name, version).config_json

    # -- model repository ----------------------------------------------------------------------

    def repository_index(self, *, ready_only: bool = False) -> list[dict[str, Any]]:
        """Triton's index: one entry per model version, name only for models never loaded."""
        entries: list[dict[str, Any]] = []
        for entry in self.lifecycle.index(in_repositories=True):
            if ready_only and entry.state is not ModelState.READY:
                continue
            item: dict[str, Any] = {"name": entry.name}
            if entry.version is not None:
                item["version"] = str(entry.version)
            if entry.state is not None and (entry.version is not None or entry.clash):
                item["state"] = entry.state.value
                if entry.reason:
                    item["reason"] = entry.reason
            entries.append(item)
        return entries

    async def load_model(
        self, name: str, config_json: str | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        """Load or reload a model (explicit model-control mode only), ``files`` being ``file:`` overrides."""
        require_explicit_control(self.explicit_model_control)
        override = requested_config(name, config_json)
        await asyncio.to_thread(self.lifecycle.load_model, name, override, files)

    async def unload_model(self, name: str, *, unload_dependents: bool = False) -> None:
        """Unload every version of a model (explicit model-control mode only)."""
        require_explicit_control(self.explicit_model_control)
        await asyncio.to_thread(self.lifecycle.unload_model, name, unload_dependents=unload_dependents)

    # -- inference -----------------------------------------------------------------------------

    async def infer(
        self,
        model: ServingModel,
        inputs: Sequence[Tensor],
        *,
        outputs: Sequence[RequestedOutput | str] = (),
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        frontend: FrontendTiming | None = None,
    ) -> InferenceResponse:
        """Run a request of a non-decoupled model and return its single response (its error raised).

        Cancelling the awaiting task cancels the request.
        """
        event = await self.infer_event(
            model, inputs, outputs=outputs, request_id=request_id, parameters=parameters, frontend=frontend
        )
        return single_response(event, model.name)

    async def infer_event(
        self,
        model: ServingModel,
        inputs: Sequence[Tensor],
        *,
        outputs: Sequence[RequestedOutput | str] = (),
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        frontend: FrontendTiming | None = None,
    ) -> ResponseEvent:
        """:meth:`infer`, returning the model's answer as it came (a frontend that words the model's
        errors apart from its own raises them with :func:`~naiad.sinks.single_response`)."""
        sink = LoopSink(self.inbox)
        request = self.service.submit(
            model, inputs, sink, outputs=outputs, request_id=request_id, parameters=parameters, frontend=frontend
        )
        self.enter()
        try:
            return await sink.next_event()
        except asyncio.CancelledError:
            _log_cancellation(request)
            request.cancel()
            raise
        finally:
            self.leave()

    def open_stream(
        self,
        model: ServingModel,
        inputs: Sequence[Tensor],
        *,
        outputs: Sequence[RequestedOutput | str] = (),
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        scheduling: Scheduling | None = None,
        frontend: FrontendTiming | None = None,
    ) -> ResponseStream:
        """Queue a request of any model now (refusals raise here); iterate the stream for its events.

        ``scheduling`` as :meth:`~naiad.service.InferenceService.submit` takes it: given, every one of
        ``parameters`` reaches the model as it is."""
        sink = LoopSink(self.inbox)
        request = self.service.submit(
            model,
            inputs,
            sink,
            outputs=outputs,
            request_id=request_id,
            parameters=parameters,
            scheduling=scheduling,
            frontend=frontend,
        )
        return ResponseStream(self, request, sink)

    # -- statistics and logging extensions -----------------------------------------------------

    def model_statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """The statistics extension's body: every READY version, or those of one model."""
        if not self.statistics:
            raise unsupported("statistics are not collected by this server (--collect-statistics=false)")
        if not name:
            serving = self.lifecycle.serving()
            versions = [
                model for model_name in sorted(serving) for _, model in sorted(serving[model_name].by_version.items())
            ]
        else:
            try:
                versions = self.lifecycle.ready_versions(name)
            except NaiadError:
                versions = []
            if not versions:
                raise invalid_arg(f"requested model '{name}' is not available")
            if version:
                versions = [model for model in versions if model.version == int(version)]
                if not versions:
                    raise invalid_arg(f"requested model version is not available for model '{name}'")
        return {"model_stats": [model.statistics.snapshot().to_json() for model in versions if model.statistics]}

    def trace_settings(self, model: str = "") -> dict[str, Any]:
        """The trace extension's settings object for ``model`` ("" the server's)."""
        self.check_trace_model(model)
        return self.service.tracer.settings(model).to_json()

    def update_trace_settings(self, model: str, change: Change) -> dict[str, Any]:
        """Apply a checked change to ``model``'s trace settings ("" the server's); returns them all."""
        self.check_trace_model(model)
        return self.service.tracer.update(model, change).to_json()

    def check_trace_model(self, model: str) -> None:
        """Refuse, in Triton's words, trace settings of a model that is not serving ("" the server's)."""
        if model and model not in self.lifecycle.serving():
            raise invalid_arg(f"Request for unknown model : {model}")

    def log_settings(self) -> dict[str, Any]:
        """The logging extension's settings object."""
        return self.logs.to_json()

    def update_log_settings(self, changes: Mapping[str, object]) -> dict[str, Any]:
        """Change some log settings; returns them all (see :meth:`naiad.logs.LogControl.update`)."""
        return self.logs.update(changes)


async def instance_ready(instance: ModelInstance) -> bool:
    """An instance's own readiness, never blocking the loop: async checks are awaited, sync ones run
    on a thread; an error or a check slower than 5 s counts as not ready."""
    method = instance.is_ready
    if getattr(type(instance), "is_ready", None) is ModelInstance.is_ready:
        return True  # the default: nothing to ask
    try:
        if inspect.iscoroutinefunction(method):
            return bool(await asyncio.wait_for(method(), _READINESS_TIMEOUT_S))
        return bool(await asyncio.wait_for(asyncio.to_thread(method), _READINESS_TIMEOUT_S))
    except Exception:
        logger.warning("an is_ready() check failed or took longer than %.0f s", _READINESS_TIMEOUT_S, exc_info=True)
        return False


class ResponseStream:
    """The events of a queued request, for a frontend that relays each one."""

    def __init__(self, dataplane: DataPlane, request: InferenceRequest, sink: LoopSink) -> None:
        self._dataplane = dataplane
        self._request = request
        self._sink = sink

    async def events(self) -> AsyncIterator[ResponseEvent]:
        """Every event up to the final one. Decoupled models may yield many responses, none, or a
        flag-only final event (``event.response is None``). If the consumer stops early (client
        gone, call cancelled) the request is cancelled: dropped if still queued, flagged if running."""
        self._dataplane.enter()
        try:
            async for event in self._sink.events():
                yield event
        finally:
            self.close()
            self._dataplane.leave()

    def close(self) -> None:
        """Cancel the request unless it has finished (call when giving up on its events)."""
        if not self._request.sender.closed:
            _log_cancellation(self._request)
            self._request.cancel()


def _log_cancellation(request: InferenceRequest) -> None:
    """A verbose line for a request its client gave up on (Triton's words begin it, for log greps)."""
    logger.debug(
        "Cancellation notification received for request '%s' of model '%s' version %d: its client gave up "
        "on it (cancelled the call, disconnected or passed its deadline); it is dropped if still queued",
        request.id,
        request.model_name,
        request.model_version,
        extra={"model": request.model_name, "version": request.model_version},
    )
