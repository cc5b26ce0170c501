"""Loading one model version: backend load, config completion, instances, scheduler, pipeline.

The steps, each a seam a backend can take part in::

    naiad_backend_initialize (first model of the backend)
    naiad_load_model          -> BackendModel (may complete the config)
    fill defaults, validate
    BackendModel.configured   (the config is final)
    naiad_create_instance     -> ModelInstance, once per instance
    naiad_create_scheduler    -> Scheduler (naiad's own unless the backend brings one)
    response pipeline         (the scheduler's stages, statistics, response cache, destinations, sink)
    model warmup              (the config's samples, on every instance; READY only if they succeed)

The result is an immutable :class:`~naiad.models.ServingModel`; on any failure everything made so
far is released and the version is UNAVAILABLE with the reason.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from naiad import config as model_config
from naiad.backend_model import BackendModel, ModelInstance
from naiad.classification import read_labels, with_step_labels
from naiad.config.normalize import ENSEMBLE_PLATFORM
from naiad.contexts import InstanceContext, ModelLoadContext, SchedulerContext
from naiad.ensemble import ENSEMBLE_BACKEND
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import RequestedOutput
from naiad.limits import DEFAULT_MAX_INSTANCES_PER_MODEL
from naiad.logs import bind_threads, model_context, unbind_dead_threads
from naiad.models import ModelSignature, ModelState, ServingModel, VersionStatus
from naiad.pipeline import ResponseStage, build_pipeline
from naiad.plugins import Backend, BackendRegistry
from naiad.protocol.model_config_pb2 import ModelConfig, ModelInstanceGroup, ModelRateLimiter
from naiad.response_cache import ModelCache, ResponseCache
from naiad.scheduling.base import Scheduler
from naiad.scheduling.execution import InstanceRunner, RateLimit
from naiad.scheduling.rate_limiter import GLOBAL_DEVICE, RateLimiter, ResourceNeeds
from naiad.statistics import ModelStatistics, StatisticsOptions
from naiad.warmup import warm_up

if TYPE_CHECKING:
    from naiad.server_handle import ServerHandle

logger = logging.getLogger(__name__)

_KIND_NAMES = {
    ModelInstanceGroup.KIND_CPU: "CPU",
    ModelInstanceGroup.KIND_GPU: "GPU",
    ModelInstanceGroup.KIND_MODEL: "MODEL",
}


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """Server-wide settings that shape how models load."""

    auto_complete: bool = True
    gpu_count: int = 0
    rate_limiter: RateLimiter | None = None
    statistics: StatisticsOptions | None = field(default_factory=StatisticsOptions)  # None: collect none
    max_instances_per_model: int = DEFAULT_MAX_INSTANCES_PER_MODEL
    response_cache: ResponseCache | None = None  # --cache-config: the cache of models that enable it
    config_name: str = ""  # --model-config-name: read <model>/configs/<name>.pbtxt where it exists
    load_retries: int = 0  # --model-load-retry-count: loads of a failed version tried again


def load_version(
    registry: BackendRegistry,
    model_dir: Path,
    base_config: ModelConfig,
    version: int,
    options: LoadOptions,
    server: ServerHandle | None = None,
    *,
    config_from_request: bool = False,
) -> VersionStatus:
    """Load ``version`` of the model in ``model_dir``; the result is READY or UNAVAILABLE.

    ``server`` is the handle backends get in their contexts (and whose loop runs async instances);
    ``config_from_request``: the config came with a load request (its paths are client input).
    """
    name = base_config.name
    status = VersionStatus(name, version)
    started = time.monotonic()
    loader = VersionLoader(registry, model_dir, version, options, server, config_from_request=config_from_request)
    try:
        with model_context(name, version):
            serving = loader.load(base_config)
    except Exception as error:
        failure = error if isinstance(error, NaiadError) else NaiadError(f"{type(error).__name__}: {error}")
        status.reason = failure.as_status_text()  # as Triton records it: "Internal: ..."
        status.failure = failure
        status.state = ModelState.UNAVAILABLE
        logger.error("model '%s' version %d failed to load: %s", name, version, status.reason)
        if failure is not error:
            logger.debug("traceback of the load failure of model '%s'", name, exc_info=error)
        with model_context(name, version):
            loader.release(name)
        return status
    if serving.statistics is not None:
        serving.statistics.load_seconds = time.monotonic() - started
    status.serving = serving
    status.state = ModelState.READY
    return status


class VersionLoader:
    """Builds one version step by step and knows what to release if a step fails."""

    def __init__(
        self,
        registry: BackendRegistry,
        model_dir: Path,
        version: int,
        options: LoadOptions,
        server: ServerHandle | None,
        *,
        config_from_request: bool = False,
    ) -> None:
        self._registry = registry
        self._model_dir = model_dir
        self._version = version
        self._options = options
        self._server = server
        self._from_request = config_from_request
        self._backend_model: BackendModel | None = None
        self._runners: list[InstanceRunner] = []
        self._active: list[InstanceRunner] = []  # not in a passive group: the ones the scheduler is given
        self._scheduler: Scheduler | None = None

    def load(self, base_config: ModelConfig) -> ServingModel:
        backend, config, context = self.configure(base_config)
        backend_model = self._backend_model
        assert backend_model is not None  # configure loaded it
        backend_model.configured(config)
        config_json = model_config.config_to_json(config)
        signature = ModelSignature.from_config(config)
        labels = read_labels(config, context.path)  # a missing file fails the load before any instance starts
        if config.platform == ENSEMBLE_PLATFORM and self._server is not None:
            labels = with_step_labels(config, labels, self._step_labels)
        statistics = self._statistics(config, signature)
        self._create_instances(backend, config, config_json, signature, statistics)
        scheduler_context = SchedulerContext(
            model_name=config.name,
            version=self._version,
            model_dir=self._model_dir,
            config=config,
            instances=self._active,
            decoupled=signature.decoupled,
            server=self._server,
            statistics=statistics,
        )
        self._scheduler = scheduler = backend.create_scheduler(backend_model, scheduler_context)
        stages: list[ResponseStage] = list(scheduler.stages())
        if statistics is not None:
            stages.append(statistics.stage())
        cache = self._model_cache(config, statistics)
        if cache is not None:
            stages.append(cache)
        reshapes = {o.name: (tuple(o.reshape.shape), tuple(o.dims)) for o in config.output if o.HasField("reshape")}
        pipeline = build_pipeline(
            stages, batching=config.max_batch_size > 0, labels=labels, reshapes=reshapes, model_name=config.name
        )
        self._start(scheduler, config)
        warm_up(config, self._model_dir, self._version, signature, self._runners, statistics)
        return ServingModel(
            name=config.name,
            version=self._version,
            backend=config.backend,
            config=config,
            config_json=config_json,
            signature=signature,
            backend_model=backend_model,
            instances=tuple(self._runners),
            scheduler=scheduler,
            statistics=statistics,
            pipeline=pipeline,
            default_outputs={name: RequestedOutput(name) for name in signature.outputs},
            cache=cache,
            labels=labels,
        )

    def _step_labels(self, model: str, version: int) -> Mapping[str, tuple[str, ...]]:
        assert self._server is not None
        return self._server.resolve(model, version if version >= 0 else "").labels

    def configure(self, base_config: ModelConfig) -> tuple[Backend, ModelConfig, ModelLoadContext]:
        """The config this version serves with: the backend loads the model (and may complete a copy of
        ``base_config``), then naiad fills the defaults and validates it. ``naiad check`` stops here;
        :meth:`release` finalizes the backend's model."""
        options = self._options
        config = ModelConfig()
        config.CopyFrom(base_config)
        backend = self._registry.initialized(_backend_name(config), self._server)
        settings = self._registry.settings
        context = ModelLoadContext(
            model_name=config.name,
            version=self._version,
            model_dir=self._model_dir,
            config=config,
            auto_complete=options.auto_complete,
            backend_config=settings.for_backend(config.backend),
            default_max_batch_size=settings.default_max_batch_size(config.backend),
            server=self._server,
            config_from_request=self._from_request,
        )
        if config.default_model_filename:  # where the backend will look, before it looks
            context.path(config.default_model_filename, "default_model_filename", in_version=True)
        self._backend_model = backend.load_model(context)
        table = self._registry.table()
        model_config.fill_defaults(config, gpu_count=options.gpu_count, backends=table)
        model_config.validate_config(config, gpu_count=options.gpu_count, backends=table)
        _check_instance_count(config, options.max_instances_per_model)
        return backend, config, context

    def _model_cache(self, config: ModelConfig, statistics: ModelStatistics | None) -> ModelCache | None:
        """The version's use of the server's response cache, if its config enables it and there is one."""
        cache = self._options.response_cache
        if not config.response_cache.enable:
            return None
        if cache is None:
            logger.warning(
                "model '%s' enables response_cache, but the server keeps no cache; its responses are not cached. "
                "Start naiad with --cache-config local,size=BYTES to cache them",
                config.name,
            )
            return None
        return ModelCache(cache, statistics)

    def _statistics(self, config: ModelConfig, signature: ModelSignature) -> ModelStatistics | None:
        if self._options.statistics is None:
            return None
        return ModelStatistics(
            config.name,
            self._version,
            decoupled=signature.decoupled,
            options=self._options.statistics,
            first_response_buckets_ms=_first_response_buckets(config),
        )

    def _create_instances(
        self,
        backend: Backend,
        config: ModelConfig,
        config_json: str,
        signature: ModelSignature,
        statistics: ModelStatistics | None,
    ) -> None:
        options = self._options
        for group_index, group in enumerate(config.instance_group):
            devices = list(group.gpus) if group.kind == ModelInstanceGroup.KIND_GPU else [0]
            placements = [device for device in devices for _ in range(group.count)]
            for index, device in enumerate(placements):
                context = InstanceContext(
                    model_name=config.name,
                    version=self._version,
                    model_dir=self._model_dir,
                    name=f"{group.name}_{index}",
                    kind=_KIND_NAMES[group.kind],
                    device_id=device,
                    config=config,
                    config_json=config_json,
                    group=group.name,
                    group_index=group_index,
                    index=index,
                    profiles=tuple(group.profile),
                    server=self._server,
                )
                assert self._backend_model is not None
                instance = backend.create_instance(self._backend_model, context)
                rate_limit = None
                if options.rate_limiter is not None and group.HasField("rate_limiter"):
                    rate_limit = RateLimit(options.rate_limiter, _resource_needs(group.rate_limiter, device))
                try:
                    runner = InstanceRunner(
                        context,
                        instance,
                        decoupled=signature.decoupled,
                        statistics=statistics,
                        rate_limit=rate_limit,
                        loop=self._server.loop if self._server is not None and _is_async(instance) else None,
                    )
                except BaseException:
                    _finalize_instance(instance, context.name, config.name)
                    raise
                self._runners.append(runner)
                if not group.passive:  # a passive instance is loaded, as in Triton, but never given requests
                    self._active.append(runner)
                if statistics is not None and group.kind == ModelInstanceGroup.KIND_GPU:
                    statistics.gpu_devices.add(device)
        if not self._runners and config.platform != ENSEMBLE_PLATFORM:
            raise NaiadError(
                f"model '{config.name}' has no instances to run: every instance_group has count 0",
                ErrorCode.INVALID_ARG,
            )
        if self._runners and not self._active:
            raise NaiadError(
                f"model '{config.name}' has no instances to run requests: every instance_group is passive; "
                "set passive: false on at least one",
                ErrorCode.INVALID_ARG,
            )

    def _start(self, scheduler: Scheduler, config: ModelConfig) -> None:
        before = set(threading.enumerate())
        scheduler.start()
        # The scheduler's worker threads log on behalf of this version (e.g. each batch at --log-verbose 1).
        names = [config.name, *(runner.name for runner in self._runners)]
        bind_threads(
            (
                thread
                for thread in threading.enumerate()
                if thread not in before and any(n in thread.name for n in names)
            ),
            config.name,
            self._version,
        )

    def release(self, name: str) -> None:
        """Stop the scheduler, then finalize the instances and the model; failures are logged."""
        release_parts(name, self._version, self._scheduler, self._runners, self._backend_model)
        self._scheduler = None
        self._runners = []
        self._active = []
        self._backend_model = None


def release_version(serving: ServingModel) -> None:
    """Stop the scheduler (finishing accepted requests), then finalize instances and model."""
    with model_context(serving.name, serving.version):
        release_parts(serving.name, serving.version, serving.scheduler, serving.instances, serving.backend_model)


def release_parts(
    name: str,
    version: int,
    scheduler: Scheduler | None,
    runners: Sequence[InstanceRunner],
    model: BackendModel | None,
) -> None:
    """Stop ``scheduler``, finalize each runner's instance, then ``model``; failures are logged."""
    if scheduler is not None:
        try:
            scheduler.stop()
        except Exception:
            logger.exception("the scheduler of model '%s' version %d failed to stop", name, version)
        unbind_dead_threads()
    for runner in runners:
        runner.close()
        _finalize_instance(runner.instance, runner.name, name)
    if model is not None:
        try:
            model.finalize()
        except Exception:
            logger.exception("model '%s' version %d failed to finalize", name, version)


def _check_instance_count(config: ModelConfig, most: int) -> None:
    """Each instance costs a thread and a copy of the model: refuse a config asking for too many."""
    total = sum(
        group.count * (len(group.gpus) if group.kind == ModelInstanceGroup.KIND_GPU else 1)
        for group in config.instance_group
    )
    if total > most:
        raise NaiadError(
            f"model '{config.name}' asks for {total} instances, more than --max-instances-per-model allows "
            f"({most}); lower the instance_group counts, or raise the limit",
            ErrorCode.INVALID_ARG,
        )


def _backend_name(config: ModelConfig) -> str:
    """The backend that loads ``config``: an ensemble names none and gets the built-in one."""
    return ENSEMBLE_BACKEND if config.platform == ENSEMBLE_PLATFORM and not config.backend else config.backend


def _is_async(instance: ModelInstance) -> bool:
    return inspect.iscoroutinefunction(instance.execute)


def _finalize_instance(instance: ModelInstance, instance_name: str, model_name: str) -> None:
    try:
        instance.finalize()
    except Exception:
        logger.exception("instance '%s' of model '%s' failed to finalize", instance_name, model_name)


def _first_response_buckets(config: ModelConfig) -> tuple[float, ...] | None:
    """Per-model buckets of ``nv_inference_first_response_histogram_ms`` (``model_metrics``), if set."""
    for control in config.model_metrics.metric_control:
        if control.metric_identifier.family == "nv_inference_first_response_histogram_ms":
            buckets = tuple(control.histogram_options.buckets)
            if buckets:
                return buckets
    return None


def _resource_needs(limits: ModelRateLimiter, device: int) -> ResourceNeeds:
    amounts = {
        (resource.name, GLOBAL_DEVICE if getattr(resource, "global") else device): resource.count
        for resource in limits.resources
    }
    return ResourceNeeds(amounts, limits.priority or 1)
