"""The server object: plugins, models, data plane and frontends in one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from naiad import __version__
from naiad.dataplane import DataPlane, ServerState
from naiad.devices import gpu_count
from naiad.errors import NaiadError
from naiad.exit_watchdog import ExitWatchdog
from naiad.grpc import GrpcFrontend, GrpcSettings
from naiad.header_forwarding import HeaderForwarding
from naiad.http import build_app
from naiad.http.serving import HttpFrontend, bind_socket
from naiad.lifecycle import DEFAULT_LOAD_THREADS, DEFAULT_UNLOAD_TIMEOUT, ModelLifecycle
from naiad.limits import DEFAULT_MAX_INSTANCES_PER_MODEL, GrpcLimits, HttpLimits
from naiad.loading import LoadOptions
from naiad.logs import LogControl, Trusted
from naiad.metrics.cache import CacheCollector
from naiad.metrics.config import MetricsOptions
from naiad.metrics.custom import CustomMetrics
from naiad.metrics.models import ModelCollector
from naiad.metrics.serving import MetricsFrontend
from naiad.metrics.system import SystemMetrics
from naiad.plugins import DEFAULT_BACKEND_DIRECTORY, BackendRegistry, BackendSettings
from naiad.polling import RepositoryPoller
from naiad.response_cache import CacheSettings, ResponseCache
from naiad.restrictions import ApiGroup, Restrictions
from naiad.scheduling.rate_limiter import RateLimiter
from naiad.server_handle import ServerHandle
from naiad.server_info import ServerInfo
from naiad.service import InferenceService
from naiad.sinks import LoopInbox
from naiad.startup_report import ModelControl, log_startup_end, warn_if_no_models
from naiad.startup_table import model_table
from naiad.trace_settings import TraceSettings
from naiad.tracing import Tracer

logger = logging.getLogger(__name__)


class StartupError(NaiadError):
    """The server cannot start; the message says why and what to change."""


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Everything ``naiad serve`` can be told, with Triton's defaults."""

    model_repositories: tuple[Path, ...]
    http_address: str = "0.0.0.0"
    http_port: int = 8000
    grpc_port: int = 8001
    # -- gRPC frontend (naiad.grpc) --
    grpc_address: str = "0.0.0.0"
    allow_grpc: bool = True
    grpc: GrpcSettings = field(default_factory=GrpcSettings)
    # -- end gRPC --
    metrics_port: int = 8002
    metrics: MetricsOptions = field(default_factory=MetricsOptions)
    collect_statistics: bool = True
    allow_http: bool = True
    http_server: str = "uvicorn"
    auto_complete: bool = True
    strict_readiness: bool = True
    exit_on_error: bool = False
    exit_timeout_secs: float = 30.0
    model_control_mode: str = "none"
    load_models: tuple[str, ...] = ()
    # -- model management (docs/model-management.md) --
    repository_poll_secs: float = 15.0
    model_load_thread_count: int = DEFAULT_LOAD_THREADS
    model_unload_timeout_secs: float = DEFAULT_UNLOAD_TIMEOUT
    rate_limit: str = "off"
    rate_limit_resources: dict[tuple[str, int], int] = field(default_factory=dict)
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
    backend_directory: Path | None = DEFAULT_BACKEND_DIRECTORY  # --backend-directory: backends not installed
    # -- limits and restrictions (docs/security.md) --
    http_limits: HttpLimits = field(default_factory=HttpLimits)
    grpc_limits: GrpcLimits = field(default_factory=GrpcLimits)
    http_restrictions: Restrictions = field(default_factory=Restrictions)
    grpc_restrictions: Restrictions = field(default_factory=Restrictions)
    max_instances_per_model: int = DEFAULT_MAX_INSTANCES_PER_MODEL
    trace: TraceSettings = field(default_factory=TraceSettings)  # --trace-config (naiad.tracing)
    cache: CacheSettings | None = None  # --cache-config (naiad.response_cache); None: no response cache
    server_id: str = "triton"  # --id: the name in the server metadata
    model_config_name: str = ""  # --model-config-name: each model's configs/<name>.pbtxt, where it has one
    reuse_http_port: bool = False  # --reuse-http-port: SO_REUSEPORT on the HTTP listener
    model_load_retry_count: int = 0  # --model-load-retry-count: loads of a failed version tried again
    http_headers: HeaderForwarding | None = None  # --http-header-forward-pattern
    grpc_headers: HeaderForwarding | None = None  # --grpc-header-forward-pattern


class Server:
    """Owns the plugin registry, the model lifecycle, the data plane and the frontends."""

    def __init__(
        self, options: ServerOptions, registry: BackendRegistry | None = None, logs: LogControl | None = None
    ) -> None:
        self.options = options
        self.registry = registry or BackendRegistry(
            settings=BackendSettings(options.backend_config), backend_directory=options.backend_directory
        )
        explicit = options.model_control_mode == "explicit"
        self.response_cache = None if options.cache is None else ResponseCache(options.cache.size)
        self.lifecycle = ModelLifecycle(
            self.registry,
            options.model_repositories,
            LoadOptions(
                auto_complete=options.auto_complete,
                gpu_count=gpu_count(),
                rate_limiter=(
                    RateLimiter(options.rate_limit_resources) if options.rate_limit == "execution_count" else None
                ),
                statistics=options.metrics.statistics if options.collect_statistics else None,
                max_instances_per_model=options.max_instances_per_model,
                response_cache=self.response_cache,
                config_name=options.model_config_name,
                load_retries=options.model_load_retry_count,
            ),
            load_threads=options.model_load_thread_count,
            unload_timeout=options.model_unload_timeout_secs,
        )
        self.repository_poller = RepositoryPoller(self.lifecycle) if options.model_control_mode == "poll" else None
        self._polling: asyncio.Task[None] | None = None
        self.service = InferenceService(self.lifecycle, Tracer(options.trace))
        inbox = LoopInbox()  # attached to the loop when the server runs
        self.custom_metrics = CustomMetrics()
        self.handle = ServerHandle(self.service, inbox, self.custom_metrics, explicit_model_control=explicit)
        self.lifecycle.server = self.handle
        self.dataplane = DataPlane(
            self.service,
            inbox,
            __version__,
            strict_readiness=options.strict_readiness,
            logs=logs,
            statistics=options.collect_statistics,
            explicit_model_control=explicit,
            name=options.server_id,
        )
        self.dataplane.http_headers = options.http_headers
        self.dataplane.grpc_headers = options.grpc_headers
        # Metrics: a registry of this server's own (never prometheus_client's global one).
        metrics = options.metrics
        self.metrics_registry = CollectorRegistry(auto_describe=False)
        self.system_metrics = SystemMetrics(
            cpu=metrics.allow_metrics and metrics.allow_cpu_metrics,
            gpu=metrics.allow_metrics and metrics.allow_gpu_metrics,
        )
        self.metrics_registry.register(ModelCollector(self.lifecycle, metrics, self.system_metrics.gpu_uuid))
        self.metrics_registry.register(self.system_metrics)
        if self.response_cache is not None:
            self.metrics_registry.register(CacheCollector(self.response_cache))
        self.metrics_registry.register(self.custom_metrics)
        self._stop = asyncio.Event()
        self.exit_timed_out = False  # the exit timeout passed with requests in flight
        self._watchdog: ExitWatchdog | None = None
        self._frontends: list[HttpFrontend | GrpcFrontend | MetricsFrontend] = []  # the started ones
        self._poller: asyncio.Task[None] | None = None

    def _log_response_cache(self) -> None:
        """Which models the response cache serves, so that a config that forgot to enable it shows."""
        cache = self.response_cache
        if cache is None:
            return
        cached = sorted(
            name
            for name, versions in self.lifecycle.serving().items()
            if any(model.cache is not None for model in versions.by_version.values())
        )
        logger.info(
            "response cache: %d bytes, for %s",
            cache.capacity,
            ", ".join(f"'{name}'" for name in cached)
            or "no model yet (a model uses it once its config says response_cache { enable: true })",
        )

    def request_stop(self, received: signal.Signals | None = None) -> None:
        """Begin a graceful shutdown (what SIGTERM and SIGINT do; ``received`` names the signal)."""
        if received is not None and not self._stop.is_set():
            logger.info("%s received", received.name)
        self._stop.set()

    async def run(self, *, when_ready: Callable[[], None] | None = None, exit_watchdog: bool = False) -> None:
        """Serve until stopped; then drain in-flight requests, unload models and return.

        ``when_ready`` runs once the server is READY (``naiad serve`` settles its heap there: see
        :mod:`naiad.heap`; a server run inside another program leaves that program's collector alone).
        ``exit_watchdog`` (``naiad serve``): when the exit timeout passed with requests in flight, the
        process exits 15 s later even if a model still holds it (:mod:`naiad.exit_watchdog`).
        """
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop, sig)
        try:
            await self.start()
            if when_ready is not None:
                when_ready()
            await self._stop.wait()
            await self.drain()
            if self.exit_timed_out and exit_watchdog:  # the process must end: see naiad.exit_watchdog
                self._watchdog = ExitWatchdog()
                self._watchdog.start()
        finally:
            await self.close()

    async def start(self) -> None:
        """Import the backends, start the frontends and load the models: READY when it returns.

        Call :meth:`close` afterwards, whether it returned or raised. With every frontend disabled
        the server serves in-process callers only (:mod:`naiad.embedded`).
        """
        self.handle.inbox.attach(asyncio.get_running_loop())
        await asyncio.to_thread(self.registry.import_installed)
        frontends = self._build_frontends()
        metrics = self.options.metrics
        if metrics.allow_metrics:
            self._poller = asyncio.create_task(self.system_metrics.run(metrics.interval_ms / 1000))
        self.registry.hook.naiad_server_configured(server=self._info())
        self._warn_about_open_control_apis()
        for frontend in frontends:
            await frontend.start()
            self._frontends.append(frontend)
        control = ModelControl(self.options.model_control_mode, self.options.repository_poll_secs)
        found = await asyncio.to_thread(self.lifecycle.discover)
        warn_if_no_models(logger, self.options.model_repositories, found, control)
        if self.repository_poller is not None:
            await asyncio.to_thread(self.repository_poller.start)
        else:
            only = set(self.options.load_models) if self.options.model_control_mode == "explicit" else None
            await asyncio.to_thread(self.lifecycle.load_all, only)
        logger.info("models:\n%s", Trusted(model_table(self.lifecycle)))
        self._log_response_cache()
        if self.options.exit_on_error and not self.lifecycle.all_ready():
            raise StartupError("some models failed to load and --exit-on-error is true; see the errors above")
        if self.repository_poller is not None and self.options.repository_poll_secs > 0:
            self._polling = asyncio.create_task(self.repository_poller.run(self.options.repository_poll_secs))
        self.dataplane.state = ServerState.READY
        listeners = ", ".join(f.describe() for f in frontends) or "in-process only, no listeners"
        log_startup_end(
            logger,
            __version__,
            listeners,
            self.lifecycle,
            strict_readiness=self.options.strict_readiness,
            control=control,
        )

    async def drain(self) -> None:
        """Refuse new requests and wait for the frontends' in-flight ones (``exit_timeout_secs`` at most).

        Past the timeout the server stops without them, as Triton does, and :attr:`exit_timed_out` is
        set (``naiad serve`` then exits with code 1).
        """
        logger.info("shutting down: readiness is now 503; waiting for in-flight requests")
        self.dataplane.state = ServerState.EXITING
        timeout = self.options.exit_timeout_secs
        if await self.dataplane.wait_idle(timeout):
            return
        self.exit_timed_out = True
        logger.error(
            "exit timeout expired: %d request(s) still in flight %g s after the stop signal; stopping without "
            "them (their clients get an error or a closed connection). Give requests longer to finish with a "
            "larger exit timeout (--exit-timeout-secs)",
            self.dataplane.in_flight,
            timeout,
        )

    async def close(self) -> None:
        """Stop the frontends, unload every model (finishing accepted requests), finalize the backends."""
        if self.repository_poller is not None and self._polling is not None:
            self.repository_poller.stop()
            await self._polling
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for frontend in self._frontends:
            await frontend.stop()
        await asyncio.to_thread(self.lifecycle.unload_all)
        await asyncio.to_thread(self.registry.finalize_all)
        self.service.tracer.close()
        self.dataplane.shared_memory.close()
        self.system_metrics.close()
        if self._watchdog is not None:
            self._watchdog.cancel()
        logger.info("naiad stopped")

    def _build_frontends(self) -> list[HttpFrontend | GrpcFrontend | MetricsFrontend]:
        """The frontends the options allow, their sockets bound."""
        options = self.options
        frontends: list[HttpFrontend | GrpcFrontend | MetricsFrontend] = []
        if options.allow_http:
            sock = bind_socket(
                options.http_address, options.http_port, "HTTP", "--http-port", reuse_port=options.reuse_http_port
            )
            app = build_app(
                self.dataplane,
                self.registry.http_routes(self.handle),
                restrictions=options.http_restrictions,
                limits=options.http_limits,
            )
            frontends.append(HttpFrontend(app, sock, options.http_server, options.http_limits))
        if options.allow_grpc:
            frontends.append(
                GrpcFrontend(
                    self.dataplane,
                    options.grpc_address,
                    options.grpc_port,
                    options.grpc,
                    limits=options.grpc_limits,
                    restrictions=options.grpc_restrictions,
                )
            )
        if options.metrics.allow_metrics:
            address = options.metrics.address or options.http_address
            sock = bind_socket(address, options.metrics_port, "metrics", "--metrics-port")
            frontends.append(MetricsFrontend(self.metrics_registry, sock, options.http_limits))
        return frontends

    def _warn_about_open_control_apis(self) -> None:
        """Control APIs anyone can call, on an address others can reach, deserve a word at startup."""
        options = self.options
        listeners = []
        if options.allow_http and not _loopback(options.http_address):
            listeners.append(("HTTP", options.http_address, options.http_restrictions, "--http-restricted-api"))
        if options.allow_grpc and not _loopback(options.grpc_address):
            listeners.append(("gRPC", options.grpc_address, options.grpc_restrictions, "--grpc-restricted-protocol"))
        control = [ApiGroup.LOGGING]  # the groups that change this server
        if options.model_control_mode == "explicit":
            control.append(ApiGroup.MODEL_REPOSITORY)
        for protocol, address, restrictions, flag in listeners:
            groups = [group.value for group in control if restrictions.get(group) is None]
            if groups:
                logger.warning(
                    "%s listens on %s and anyone who reaches it may call %s; restrict them with %s=%s:<header>=<value>"
                    " or listen on 127.0.0.1",
                    protocol,
                    address,
                    ", ".join(groups),
                    flag,
                    ",".join(groups),
                )

    def _info(self) -> ServerInfo:
        return ServerInfo(
            name="naiad",
            version=__version__,
            model_repositories=self.options.model_repositories,
            http_port=self.options.http_port if self.options.allow_http else None,
            grpc_port=self.options.grpc_port if self.options.allow_grpc else None,
            metrics_port=self.options.metrics_port if self.options.metrics.allow_metrics else None,
            backend_config=self.options.backend_config,
        )


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"
