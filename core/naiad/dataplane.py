"""The protocol-neutral data plane behind every frontend.

HTTP and gRPC decode their wire formats, call these methods, and encode what comes back;
every behaviour (lookups, validation, parameters, scheduling) is written once, here.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from naiad import config as model_config
from naiad.errors import ErrorCode, NaiadError, invalid_arg, unavailable, unsupported
from naiad.inference import (
    SEQUENCE_END,
    SEQUENCE_START,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    ResponseEvent,
    ResponseStream,
    Tensor,
)
from naiad.lifecycle import ModelLifecycle
from naiad.logs import LogControl
from naiad.models import ModelState, ModelVersion
from naiad.validation import validate_inputs, validate_outputs

SERVER_NAME = "triton"

EXTENSIONS = (
    "sequence",
    "model_repository",
    "schedule_policy",
    "model_configuration",
    "binary_tensor_data",
    "parameters",
)

# Request parameters the server consumes; they never reach the model.
_SCHEDULING_PARAMETERS = frozenset(
    {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "binary_data_output"}
)


class ServerState(enum.Enum):
    """Whether the server takes new work."""

    STARTING = "STARTING"
    READY = "READY"
    EXITING = "EXITING"


@dataclass(slots=True)
class PreparedRequest:
    """A validated request and the stream its responses arrive on."""

    model: ModelVersion
    request: InferenceRequest
    stream: ResponseStream


class DataPlane:
    """Health, metadata, config and inference for every frontend."""

    def __init__(
        self,
        lifecycle: ModelLifecycle,
        version: str,
        *,
        strict_readiness: bool = True,
        logs: LogControl | None = None,
        statistics: bool = True,
        explicit_model_control: bool = False,
    ) -> None:
        self.lifecycle = lifecycle
        self.explicit_model_control = explicit_model_control
        self.version = version
        self.strict_readiness = strict_readiness
        self.logs = logs or LogControl()
        self.statistics = statistics
        self.state = ServerState.STARTING
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

    def _enter(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()

    # -- health and metadata -----------------------------------------------------------------

    def live(self) -> bool:
        return self.state is not ServerState.EXITING

    def ready(self) -> bool:
        if self.state is not ServerState.READY:
            return False
        return not self.strict_readiness or self.lifecycle.all_ready()

    def model_ready(self, name: str, version: str = "") -> bool:
        try:
            model = self.lifecycle.lookup(name, version)
        except NaiadError:
            return False
        return all(instance.is_ready() for _, instance in model.instances)

    def server_metadata(self) -> dict[str, Any]:
        extensions = [*EXTENSIONS, "statistics", "logging"] if self.statistics else [*EXTENSIONS, "logging"]
        return {"name": SERVER_NAME, "version": self.version, "extensions": extensions}

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
        for entry in self.lifecycle.index(include_unloaded=True):
            if ready_only and entry.state is not ModelState.READY:
                continue
            item: dict[str, Any] = {"name": entry.name}
            if entry.version is not None and entry.state is not None:
                item["version"] = str(entry.version)
                item["state"] = entry.state.value
                if entry.reason:
                    item["reason"] = entry.reason
            entries.append(item)
        return entries

    async def load_model(self, name: str, config_json: str | None = None) -> None:
        """Load or reload a model (explicit model-control mode only)."""
        self._require_explicit_control()
        override = model_config.config_from_json(config_json) if config_json else None
        await asyncio.to_thread(self.lifecycle.load_model, name, override)

    async def unload_model(self, name: str) -> None:
        """Unload every version of a model (explicit model-control mode only)."""
        self._require_explicit_control()
        await asyncio.to_thread(self.lifecycle.unload_model, name)

    def _require_explicit_control(self) -> None:
        if not self.explicit_model_control:
            raise unavailable("explicit model load / unload is not allowed if polling is enabled")

    # -- inference -----------------------------------------------------------------------------

    def prepare(
        self,
        model: ModelVersion,
        inputs: Sequence[Tensor],
        requested_outputs: Sequence[str],
        *,
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
    ) -> PreparedRequest:
        """Validate a decoded request and bind it to a response stream; nothing is queued yet."""
        if self.state is ServerState.EXITING:
            raise unavailable("Server not ready: it is shutting down")
        signature = model.signature
        assert signature is not None
        validate_outputs(model.name, signature, requested_outputs)
        batch_size = validate_inputs(model.name, signature, inputs, request_id)
        stream = ResponseStream(asyncio.get_running_loop())
        request = InferenceRequest(
            model_name=model.name,
            model_version=model.version,
            inputs={tensor.name: tensor for tensor in inputs},
            requested_outputs=list(requested_outputs) or list(signature.outputs),
            sender=stream.sender,
            id=request_id,
            batch_size=batch_size,
        )
        _apply_parameters(request, parameters or {})
        return PreparedRequest(model, request, stream)

    def submit(self, prepared: PreparedRequest) -> None:
        """Queue a prepared request on its model's scheduler (and count it in the model's statistics)."""
        model = prepared.model
        scheduler = model.scheduler
        if scheduler is None:
            raise unavailable(f"model '{model.name}' is not at ready state")
        statistics = model.statistics
        if statistics is None:
            scheduler.submit(prepared.request)
            return
        tracker = statistics.track(prepared.request)
        try:
            scheduler.submit(prepared.request)
        except Exception as error:
            statistics.refused(tracker, error if isinstance(error, NaiadError) else NaiadError(str(error)))
            raise

    async def stream(self, prepared: PreparedRequest) -> AsyncIterator[ResponseEvent]:
        """Queue a request of any model and yield its events until the final one.

        Decoupled models may yield many responses, none, or a flag-only final event
        (``event.response is None``). If the consumer stops early (client gone, call
        cancelled) the request is cancelled: dropped if still queued, flagged if running.
        """
        self.submit(prepared)
        self._enter()
        try:
            while True:
                event = await prepared.stream.next_event()
                yield event
                if event.final:
                    return
        finally:
            if not prepared.request.sender.closed:
                prepared.request.cancel()
            self._leave()

    async def infer(self, prepared: PreparedRequest) -> InferenceResponse:
        """Run a request of a non-decoupled model and return its single response."""
        signature = prepared.model.signature
        assert signature is not None
        if signature.decoupled:
            raise unsupported(
                f"model '{prepared.model.name}' uses the decoupled transaction policy and may send "
                "any number of responses; use gRPC ModelStreamInfer or /generate_stream instead"
            )
        self.submit(prepared)
        self._enter()
        try:
            event = await prepared.stream.next_event()
        except asyncio.CancelledError:
            prepared.request.cancel()
            raise
        finally:
            self._leave()
        if event.response is None:
            raise NaiadError(f"model '{prepared.model.name}' sent a final flag without a response", ErrorCode.INTERNAL)
        if event.response.error is not None:
            raise event.response.error
        return event.response

    # -- statistics and logging extensions -----------------------------------------------------

    def model_statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """The statistics extension's body: every READY version, or those of one model."""
        if not self.statistics:
            raise unsupported("statistics are not collected by this server (--collect-statistics=false)")
        if not name:
            versions = [
                loaded
                for record in sorted(self.lifecycle.records(), key=lambda record: record.name)
                for _, loaded in sorted(record.versions.items())
                if loaded.ready
            ]
        else:
            try:
                versions = self.lifecycle.ready_versions(name)
            except NaiadError:
                versions = []
            if not versions:
                raise invalid_arg(f"requested model '{name}' is not available")
            if version:
                versions = [loaded for loaded in versions if loaded.version == int(version)]
                if not versions:
                    raise invalid_arg(f"requested model version is not available for model '{name}'")
        return {"model_stats": [loaded.statistics.snapshot().to_json() for loaded in versions if loaded.statistics]}

    def log_settings(self) -> dict[str, Any]:
        """The logging extension's settings object."""
        return self.logs.to_json()

    def update_log_settings(self, changes: Mapping[str, object]) -> dict[str, Any]:
        """Change some log settings; returns them all (see :meth:`naiad.logs.LogControl.update`)."""
        return self.logs.update(changes)


def _apply_parameters(request: InferenceRequest, parameters: Mapping[str, ParameterValue]) -> None:
    """Move scheduling parameters onto the request; keep custom ones for the model."""
    for key, value in parameters.items():
        if key.startswith("triton_"):
            raise invalid_arg(
                "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
            )
        if key not in _SCHEDULING_PARAMETERS:
            request.parameters[key] = value
    sequence_id = parameters.get("sequence_id", 0)
    if isinstance(sequence_id, bool) or not isinstance(sequence_id, int | str):
        raise invalid_arg("parameter 'sequence_id' must be an unsigned integer or a string")
    request.correlation_id = sequence_id
    request.flags = (SEQUENCE_START if parameters.get("sequence_start") is True else 0) | (
        SEQUENCE_END if parameters.get("sequence_end") is True else 0
    )
    request.priority = _unsigned(parameters, "priority")
    request.timeout_us = _unsigned(parameters, "timeout")


def _unsigned(parameters: Mapping[str, ParameterValue], key: str) -> int:
    value = parameters.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_arg(f"parameter '{key}' must be an unsigned integer, got {value!r}")
    return value
