"""Loading a model in the test process through naiad's real load pipeline, without a server.

:func:`load_model` does what the server does for one version (backend detection, the backend's
``naiad_load_model``, defaults, validation, ``configured``, instances, the scheduler, the response
pipeline) and hands back a :class:`LoadedModel` to run requests through the scheduler
(:meth:`LoadedModel.infer`) or as hand-made batches on one instance (:meth:`LoadedModel.execute`)::

    from naiad.testing import load_model

    with load_model(repository / "add_sub", auto_complete=False) as model:
        response = model.infer({"INPUT0": a, "INPUT1": b})

Load failures raise the backend's own exception. A backend not installed as a distribution can be
given as ``plugin=`` (its hook module or object) and ``backend=`` (its name).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy.typing as npt

from naiad import config as model_config
from naiad import datatypes
from naiad.backend_model import BackendModel, ModelInstance
from naiad.errors import NaiadError, invalid_arg
from naiad.inference import (
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    RequestedOutput,
    ResponseEvent,
    ResponseSender,
    ResponseSink,
)
from naiad.lifecycle import ModelLifecycle, ModelRecord
from naiad.loading import LoadOptions, VersionLoader, release_version
from naiad.loop_thread import LoopThread
from naiad.models import ModelState, ServingModel, VersionStatus
from naiad.plugins import BackendRegistry, BackendSettings
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.repository import ModelSource
from naiad.server_handle import ServerHandle
from naiad.sinks import BlockingSink
from naiad.statistics import StatisticsOptions
from naiad.tensor import Tensor

Inputs = Mapping[str, npt.NDArray[Any] | Tensor]


class ResponseCollector:
    """A sink that keeps every event of one request; :meth:`wait` blocks until the final one."""

    def __init__(self) -> None:
        self.events: list[ResponseEvent] = []
        self._final = threading.Event()
        self._lock = threading.Lock()

    def deliver(self, event: ResponseEvent) -> None:
        with self._lock:
            self.events.append(event)
        if event.final:
            self._final.set()

    def wait(self, timeout: float = 10.0) -> ResponseCollector:
        if not self._final.wait(timeout):
            raise AssertionError(f"no final response within {timeout} s: {self.events}")
        return self

    @property
    def responses(self) -> list[InferenceResponse]:
        """The responses so far (flag-only finals left out)."""
        return [event.response for event in self.events if event.response is not None]

    def only(self, timeout: float = 10.0) -> InferenceResponse:
        """The single final response of a non-decoupled request."""
        self.wait(timeout)
        if len(self.events) != 1 or not self.events[0].final or self.events[0].response is None:
            raise AssertionError(f"expected exactly one final response, got {self.events}")
        return self.events[0].response

    def outputs(self, timeout: float = 10.0) -> dict[str, npt.NDArray[Any]]:
        """The single response's outputs as host arrays; its error is raised."""
        response = self.only(timeout)
        if response.error is not None:
            raise response.error
        return {tensor.name: tensor.numpy() for tensor in response.outputs}


class LoadedModel:
    """One model version loaded in-process, with its own event loop thread and server handle."""

    def __init__(self, serving: ServingModel, lifecycle: ModelLifecycle, loop: LoopThread) -> None:
        self.serving = serving
        self._lifecycle = lifecycle
        self._loop = loop
        self.server: ServerHandle = lifecycle.server  # type: ignore[assignment]
        self._closed = False

    @property
    def name(self) -> str:
        return self.serving.name

    @property
    def version(self) -> int:
        return self.serving.version

    @property
    def config(self) -> ModelConfig:
        """The final config (completed, defaults filled, validated)."""
        return self.serving.config

    @property
    def config_json(self) -> str:
        return self.serving.config_json

    @property
    def backend_model(self) -> BackendModel:
        return self.serving.backend_model

    @property
    def instances(self) -> list[ModelInstance]:
        """The backend's instances, in creation order."""
        return [runner.instance for runner in self.serving.instances]

    def infer(
        self,
        inputs: Inputs,
        *,
        outputs: Sequence[RequestedOutput | str] = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str = "",
        timeout: float = 10.0,
    ) -> InferenceResponse:
        """Run one request through the scheduler and return its single response (errors included)."""
        sink = BlockingSink()
        self.submit(inputs, sink, outputs=outputs, parameters=parameters, request_id=request_id)
        event = sink.next_event(timeout)
        if event.response is None:
            raise AssertionError(f"model '{self.name}' sent a final flag without a response")
        return event.response

    def submit(
        self,
        inputs: Inputs,
        sink: ResponseSink,
        *,
        outputs: Sequence[RequestedOutput | str] = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str = "",
    ) -> InferenceRequest:
        """Validate and queue one request, as a frontend does; its events go to ``sink``."""
        return self.server.submit(
            self.name,
            tensors(inputs),
            sink,
            version=self.version,
            outputs=outputs,
            parameters=parameters,
            request_id=request_id,
        )

    def request(
        self, inputs: Inputs, *, outputs: Sequence[str] = (), **fields: Any
    ) -> tuple[InferenceRequest, ResponseCollector]:
        """A request bound to this version's response pipeline but not queued (for :meth:`execute`),
        its inputs in their config reshape, as the core hands them to a backend.

        ``fields`` set any other :class:`~naiad.inference.InferenceRequest` field (``id``,
        ``correlation_id``, ``flags``, ``parameters``, ``batch_size``, ...).
        """
        collector = ResponseCollector()
        names = list(outputs) or list(self.serving.default_outputs)
        request = InferenceRequest(
            model_name=self.name,
            model_version=self.version,
            inputs=self.serving.signature.model_shaped({tensor.name: tensor for tensor in tensors(inputs)}),
            requested_outputs={name: RequestedOutput(name) for name in names},
            sender=ResponseSender(collector, self.serving.pipeline),
            **fields,
        )
        return request, collector

    def execute(self, requests: Sequence[InferenceRequest], *, instance: int = 0) -> None:
        """Run one batch on one instance as a scheduler would (the execution contract enforced)."""
        runner = self.serving.instances[instance]
        if runner.is_async:
            asyncio.run_coroutine_threadsafe(runner.execute_async(requests), self._loop.loop).result()
        else:
            runner.execute(requests)

    def close(self) -> None:
        """Unload: stop the scheduler, finalize instances and model, stop the loop."""
        if self._closed:
            return
        self._closed = True
        try:
            release_version(self.serving)
        finally:
            self._loop.stop()

    def __enter__(self) -> LoadedModel:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def load_model(
    model_dir: Path,
    *,
    version: int | None = None,
    auto_complete: bool = True,
    backend_config: Mapping[str, Mapping[str, str]] | None = None,
    gpu_count: int = 0,
    statistics: bool = True,
    plugin: object | None = None,
    backend: str | None = None,
) -> LoadedModel:
    """Load one version of the model in ``model_dir`` (its latest by the version policy by default).

    ``backend_config`` is ``--backend-config`` as ``{backend: {key: value}}`` (``""`` for global
    settings). ``plugin``/``backend`` register a backend in-process under that name.
    """
    registry = BackendRegistry(settings=BackendSettings(dict(backend_config or {})))
    if plugin is not None:
        registry.register(backend or _plugin_name(plugin), plugin)
    registry.import_installed()  # as the server does: every installed backend's info counts
    config = model_config.read_model_config(model_dir, model_name=model_dir.name)
    model_config.detect_backend(config, model_dir, registry.table())
    if version is None:
        chosen, _ = model_config.select_versions(config.version_policy, model_config.list_version_dirs(model_dir))
        if not chosen:
            raise invalid_arg(f"model '{config.name}' has no version folder its version policy selects")
        version = max(chosen)
    options = LoadOptions(
        auto_complete=auto_complete,
        gpu_count=gpu_count,
        statistics=StatisticsOptions() if statistics else None,
    )
    lifecycle = ModelLifecycle(registry, [model_dir.parent], options)
    loop = LoopThread("naiad-test-loop")
    loader = VersionLoader(registry, model_dir, version, options, loop.serve(lifecycle))
    try:
        serving = loader.load(config)
    except BaseException:
        loader.release(config.name)
        loop.stop()
        raise
    status = VersionStatus(serving.name, version, ModelState.READY, serving=serving)
    lifecycle.store(ModelRecord(serving.name, ModelSource(serving.name, model_dir), {version: status}))
    return LoadedModel(serving, lifecycle, loop)


def tensors(inputs: Inputs) -> list[Tensor]:
    """Tensors from arrays (str/bytes arrays become BYTES) or tensors, keyed by input name."""
    result: list[Tensor] = []
    for name, value in inputs.items():
        if isinstance(value, Tensor):
            result.append(value)
            continue
        datatype = datatypes.from_numpy(value.dtype)
        data = datatypes.to_bytes_array(value) if datatype.wire == "BYTES" else value
        result.append(Tensor(name, datatype.wire, data))
    return result


def _plugin_name(plugin: object) -> str:
    name = getattr(plugin, "__name__", "")
    if not name:
        raise NaiadError("load_model(plugin=...) needs backend= when the plugin object has no __name__")
    return str(name).rpartition(".")[2]
