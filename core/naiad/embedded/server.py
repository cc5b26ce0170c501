"""naiad in a Python program: the server with no listeners, called in-process (docs/pipelines.md).

:class:`Server` runs :class:`naiad.server.Server` with every frontend disabled: the same plugins,
model loading, data plane and :meth:`naiad.service.InferenceService.submit` as ``naiad serve``, so
validation, scheduling, statistics, cancellation and streaming behave as over HTTP and gRPC. naiad's
event loop runs on a thread of its own; the program calls from any thread or event loop.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from naiad.dataplane import DataPlane
from naiad.embedded.inflight import InFlight
from naiad.embedded.inputs import Inputs, as_tensors
from naiad.embedded.loop import LoopThread
from naiad.embedded.responses import AsyncResponseStream, CallerInbox, Response, ResponseStream, response_of
from naiad.errors import ErrorCode, NaiadError, unavailable
from naiad.inference import InferenceRequest, ParameterValue, RequestedOutput, ResponseSink
from naiad.lifecycle import DEFAULT_LOAD_THREADS, DEFAULT_UNLOAD_TIMEOUT
from naiad.limits import DEFAULT_MAX_INSTANCES_PER_MODEL
from naiad.logs import LogControl, configure_logging
from naiad.metrics.config import MetricsOptions
from naiad.overrides import FILE_PREFIX
from naiad.scheduling.rate_limiter import parse_resource
from naiad.server import Server as ServerCore
from naiad.server import ServerOptions
from naiad.sinks import BlockingSink, LoopSink

logger = logging.getLogger(__name__)

MODEL_CONTROL_MODES = ("none", "poll", "explicit")
_NOT_STARTED = "this naiad server is not started; call start() or use it in a with block"

T = TypeVar("T")
Outputs = Sequence[str | RequestedOutput]
Version = str | int


class Server:
    """A naiad server in this process, without HTTP or gRPC: start it, run requests, stop it.

    The keyword arguments are ``naiad serve``'s flags that apply in-process, with the same
    defaults. Logging is left to the program unless ``log_verbose`` is given; then naiad logs as
    ``naiad serve`` does (one handler on the root logger, to stderr or ``log_file``) until stopped.
    Use it as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        model_repository: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        model_control_mode: str = "none",
        load_models: Sequence[str] = (),
        backend_config: Mapping[str, Mapping[str, str]] | None = None,
        strict_model_config: bool = False,
        strict_readiness: bool = True,
        exit_on_error: bool = False,
        exit_timeout_secs: float = 30.0,
        repository_poll_secs: float = 15.0,
        model_load_thread_count: int = DEFAULT_LOAD_THREADS,
        model_unload_timeout_secs: float = DEFAULT_UNLOAD_TIMEOUT,
        rate_limit: str = "off",
        rate_limit_resources: Sequence[str] = (),
        collect_statistics: bool = True,
        max_instances_per_model: int = DEFAULT_MAX_INSTANCES_PER_MODEL,
        log_verbose: int | None = None,
        log_format: str = "default",
        log_file: str = "",
    ) -> None:
        if isinstance(model_repository, str | os.PathLike):
            model_repository = [model_repository]
        repositories = tuple(Path(path).resolve() for path in model_repository)
        for repository in repositories:
            if not repository.is_dir():
                raise ValueError(f"model repository '{repository}' does not exist or is not a folder")
        if model_control_mode not in MODEL_CONTROL_MODES:
            raise ValueError(f"model_control_mode must be one of {MODEL_CONTROL_MODES}, got '{model_control_mode}'")
        if load_models and model_control_mode != "explicit":
            raise ValueError("load_models applies with model_control_mode='explicit' only (else every model loads)")
        if rate_limit not in ("off", "execution_count"):
            raise ValueError(f"rate_limit must be 'off' or 'execution_count', got '{rate_limit}'")
        self.options = ServerOptions(
            model_repositories=repositories,
            allow_http=False,
            allow_grpc=False,
            metrics=MetricsOptions(allow_metrics=False, allow_cpu_metrics=False, allow_gpu_metrics=False),
            collect_statistics=collect_statistics,
            auto_complete=not strict_model_config,
            strict_readiness=strict_readiness,
            exit_on_error=exit_on_error,
            exit_timeout_secs=exit_timeout_secs,
            model_control_mode=model_control_mode,
            load_models=tuple(load_models),
            repository_poll_secs=repository_poll_secs,
            model_load_thread_count=model_load_thread_count,
            model_unload_timeout_secs=model_unload_timeout_secs,
            rate_limit=rate_limit,
            rate_limit_resources=dict(parse_resource(text) for text in rate_limit_resources),
            backend_config={backend: dict(settings) for backend, settings in (backend_config or {}).items()},
            max_instances_per_model=max_instances_per_model,
        )
        self._log_settings = (log_verbose, log_format, log_file) if log_verbose is not None else None
        self._logs: LogControl | None = None
        self._core: ServerCore | None = None
        self._loop: LoopThread | None = None
        self._in_flight = InFlight()
        self._lock = threading.Lock()  # start and stop
        self._stopped = False

    # -- start and stop ------------------------------------------------------------------------

    def start(self) -> Server:
        """Import the backends and load the models (all of them, or ``load_models``); returns when READY.

        A model that fails to load is logged and left UNAVAILABLE, the others serve (unless
        ``exit_on_error``: then this raises and nothing is left running).
        """
        with self._lock:
            if self._core is not None or self._stopped:
                raise RuntimeError("this naiad server was started already; create a new Server to start another")
            if self._log_settings is not None:
                verbose, log_format, log_file = self._log_settings
                self._logs = configure_logging(verbose, log_format=log_format, log_file=log_file)
            core = self._core = ServerCore(self.options, logs=self._logs)
            loop = self._loop = LoopThread("naiad-loop")
            try:
                loop.run(core.start())
            except BaseException:
                self._core, self._loop, self._stopped = None, None, True
                self._shut_down(loop, core)
                raise
        return self

    def stop(self) -> None:
        """Stop gracefully: refuse new requests, finish the accepted ones, unload every model, finalize
        the backends. Waits ``exit_timeout_secs`` at most for unfinished requests; idempotent."""
        with self._lock:
            core, loop = self._core, self._loop
            if core is None or loop is None or self._stopped:
                return
            self._stopped = True
            deadline = time.monotonic() + self.options.exit_timeout_secs
            try:
                loop.run(core.drain())
                if not self._in_flight.wait_idle(max(0.0, deadline - time.monotonic())):
                    logger.warning(
                        "in-process requests still unfinished after %.0f s (exit_timeout_secs); stopping anyway",
                        self.options.exit_timeout_secs,
                    )
            finally:
                self._shut_down(loop, core)

    def _shut_down(self, loop: LoopThread, core: ServerCore) -> None:
        try:
            loop.run(core.close())
        finally:
            loop.close()
            if self._logs is not None:
                self._logs.close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # -- inference -----------------------------------------------------------------------------

    def infer(
        self,
        model: str,
        inputs: Inputs,
        *,
        version: Version = "",
        outputs: Outputs = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str = "",
        timeout: float | None = None,
    ) -> Response:
        """Run one request and wait for its response; call from any thread.

        ``version`` "" (or 0) is the latest READY version; ``outputs`` names the outputs wanted (all
        by default); ``parameters`` are the request's parameters (``priority``, ``timeout`` in µs,
        ``sequence_id``..., or the model's own). Raises :class:`~naiad.errors.NaiadError` with
        Triton's message and code; after ``timeout`` seconds the request is cancelled and
        UNAVAILABLE raised. Decoupled models answer through :meth:`stream`.
        """
        if self._loop is not None and self._loop.on_loop():
            raise RuntimeError(f"Server.infer('{model}') would block naiad's event loop; await infer_async there")
        sink = BlockingSink()
        request = self._submit(model, inputs, sink, version, outputs, parameters, request_id, single=True)
        try:
            event = sink.next_event(timeout)
        except NaiadError:
            request.cancel()
            raise unavailable(
                f"model '{model}' sent no response within {timeout} s; the request was cancelled "
                "(raise the timeout, or check the model's load with model_statistics)"
            ) from None
        except BaseException:  # KeyboardInterrupt: nobody waits for the response any more
            request.cancel()
            raise
        return _single(request, response_of(request, event))

    async def infer_async(
        self,
        model: str,
        inputs: Inputs,
        *,
        version: Version = "",
        outputs: Outputs = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str = "",
    ) -> Response:
        """:meth:`infer` for coroutines, on any event loop; cancelling the coroutine cancels the request."""
        sink = LoopSink(CallerInbox())
        request = self._submit(model, inputs, sink, version, outputs, parameters, request_id, single=True)
        try:
            event = await sink.next_event()
        except BaseException:
            request.cancel()
            raise
        return _single(request, response_of(request, event))

    def stream(
        self,
        model: str,
        inputs: Inputs,
        *,
        version: Version = "",
        outputs: Outputs = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str = "",
    ) -> ResponseStream:
        """Queue a request on any model (decoupled ones included) and iterate its responses as they come.

        Refusals (unknown model, invalid inputs, a server stopping) raise here; the returned stream
        yields each response, and :meth:`ResponseStream.cancel` cancels the request.
        """
        sink = BlockingSink()
        request = self._submit(model, inputs, sink, version, outputs, parameters, request_id, single=False)
        return ResponseStream(request, sink)

    def stream_async(
        self,
        model: str,
        inputs: Inputs,
        *,
        version: Version = "",
        outputs: Outputs = (),
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str = "",
    ) -> AsyncResponseStream:
        """:meth:`stream` for coroutines: call it on a running event loop, then ``async for`` the responses."""
        sink = LoopSink(CallerInbox())
        request = self._submit(model, inputs, sink, version, outputs, parameters, request_id, single=False)
        return AsyncResponseStream(request, sink)

    def _submit(
        self,
        model: str,
        inputs: Inputs,
        sink: ResponseSink,
        version: Version,
        outputs: Outputs,
        parameters: Mapping[str, ParameterValue] | None,
        request_id: str,
        *,
        single: bool,
    ) -> InferenceRequest:
        """Queue a request through the service every frontend uses; counted until its final response."""
        core = self._running()
        tensors = as_tensors(model, inputs)
        tracked = self._in_flight.track(sink)
        try:
            return core.service.submit(
                model,
                tensors,
                tracked,
                version=version,
                outputs=outputs,
                request_id=request_id,
                parameters=parameters,
                refuse_decoupled=_decoupled_refusal(model) if single else None,
            )
        except BaseException:
            tracked.abandon()
            raise

    # -- model repository ----------------------------------------------------------------------

    def load_model(
        self,
        model: str,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Load or reload a model (``model_control_mode="explicit"``); returns when it serves.

        ``config`` replaces its config.pbtxt: the model configuration as JSON (a string, or a dict),
        as the load API's ``config`` parameter takes it. ``files`` (path in the model folder, e.g.
        ``"1/model.py"`` -> content) load the model from those files instead of the repository,
        as the load API's ``file:`` parameters do; they need ``config``. Versions already serving
        keep serving if the new ones fail to load.
        """
        config_json = config if config is None or isinstance(config, str) else json.dumps(config)
        overrides = {FILE_PREFIX + path: content for path, content in files.items()} if files else None
        self._loop_run(self._dataplane().load_model(model, config_json, overrides))

    def unload_model(self, model: str, *, unload_dependents: bool = False) -> None:
        """Unload every version of a model (``model_control_mode="explicit"``), finishing its accepted
        requests; with ``unload_dependents``, the models that depend on it (ensembles) too."""
        self._loop_run(self._dataplane().unload_model(model, unload_dependents=unload_dependents))

    def models(self, *, ready_only: bool = False) -> list[dict[str, Any]]:
        """The repository index: every model, with each version's state and the reason it is not READY."""
        return self._dataplane().repository_index(ready_only=ready_only)

    # -- health and model queries --------------------------------------------------------------

    def live(self) -> bool:
        """Whether the server is started and not stopping."""
        return self._core is not None and not self._stopped

    def ready(self) -> bool:
        """Whether the server is READY (with ``strict_readiness``: and every model too)."""
        return self._core is not None and not self._stopped and self._core.dataplane.ready()

    def metadata(self) -> dict[str, Any]:
        """The server metadata: name, version and extensions, as over HTTP."""
        return self._dataplane().server_metadata()

    def model_ready(self, model: str, version: Version = "") -> bool:
        """Whether the model (version) is READY and each of its instances says it is ready."""
        return self._loop_run(self._dataplane().model_ready(model, _version(version)))

    def model_metadata(self, model: str, version: Version = "") -> dict[str, Any]:
        """The model's metadata (inputs, outputs, versions), as over HTTP."""
        return self._dataplane().model_metadata(model, _version(version))

    def model_config(self, model: str, version: Version = "") -> dict[str, Any]:
        """The model's final configuration, as JSON (a dict), as over HTTP."""
        config: dict[str, Any] = json.loads(self._dataplane().model_config_json(model, _version(version)))
        return config

    def model_statistics(self, model: str = "", version: Version = "") -> dict[str, Any]:
        """The statistics extension's body for one model ("" for all): counts and durations in ns."""
        return self._dataplane().model_statistics(model, _version(version))

    # -- internals -----------------------------------------------------------------------------

    def _running(self) -> ServerCore:
        core = self._core
        if core is None:
            raise unavailable(_NOT_STARTED)
        return core

    def _dataplane(self) -> DataPlane:
        return self._running().dataplane

    def _loop_run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a data-plane coroutine on naiad's loop and wait for it."""
        loop = self._loop
        if loop is None or self._stopped:
            coroutine.close()
            raise unavailable("this naiad server is stopped" if self._stopped else _NOT_STARTED)
        return loop.run(coroutine)


def _single(request: InferenceRequest, response: Response | None) -> Response:
    if response is None:
        raise NaiadError(f"model '{request.model_name}' sent a final flag without a response", ErrorCode.INTERNAL)
    return response


def _decoupled_refusal(model: str) -> str:
    return (
        f"model '{model}' uses the decoupled transaction policy and may send any number of responses; "
        "read them with Server.stream() or Server.stream_async()"
    )


def _version(version: Version) -> str:
    return str(version) if version else ""
