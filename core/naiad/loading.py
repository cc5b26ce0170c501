"""Loading one model version: backend load, config completion, instances, scheduler."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from naiad import config as model_config
from naiad.backend import InstanceContext, ModelInstance, ModelLoadContext
from naiad.errors import ErrorCode, NaiadError
from naiad.logs import bind_threads, model_context, unbind_dead_threads
from naiad.models import ModelSignature, ModelState, ModelVersion
from naiad.plugins import BackendRegistry
from naiad.protocol.model_config_pb2 import ModelConfig, ModelInstanceGroup, ModelRateLimiter
from naiad.scheduling import build_scheduler
from naiad.scheduling.rate_limiter import GLOBAL_DEVICE, RateLimitedInstance, RateLimiter, ResourceNeeds
from naiad.statistics import InstrumentedInstance, ModelStatistics, StatisticsOptions

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
    backend_config: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    rate_limiter: RateLimiter | None = None
    statistics: StatisticsOptions | None = field(default_factory=StatisticsOptions)  # None: collect none


def load_version(
    registry: BackendRegistry,
    model_dir: Path,
    base_config: ModelConfig,
    version: int,
    options: LoadOptions,
) -> ModelVersion:
    """Load ``version`` of the model in ``model_dir``; the result is READY or UNAVAILABLE."""
    name = base_config.name
    loaded = ModelVersion(name, version)
    started = time.monotonic()
    try:
        with model_context(name, version):
            _load_into(loaded, registry, model_dir, base_config, options)
    except Exception as error:
        loaded.reason = error.message if isinstance(error, NaiadError) else f"{type(error).__name__}: {error}"
        loaded.state = ModelState.UNAVAILABLE
        logger.error("model '%s' version %d failed to load: %s", name, version, loaded.reason)
        if not isinstance(error, NaiadError):
            logger.debug("traceback of the load failure of model '%s'", name, exc_info=error)
        release_version(loaded)
        return loaded
    if loaded.statistics is not None:
        loaded.statistics.load_seconds = time.monotonic() - started
    loaded.state = ModelState.READY
    return loaded


def _load_into(
    loaded: ModelVersion,
    registry: BackendRegistry,
    model_dir: Path,
    base_config: ModelConfig,
    options: LoadOptions,
) -> None:
    config = ModelConfig()
    config.CopyFrom(base_config)
    backend = registry.get(config.backend)
    context = ModelLoadContext(
        model_name=config.name,
        version=loaded.version,
        model_dir=model_dir,
        config=config,
        auto_complete=options.auto_complete,
        backend_config=dict(options.backend_config.get(config.backend, {})),
    )
    loaded.backend_model = backend.load_model(context)
    model_config.fill_defaults(config, gpu_count=options.gpu_count)
    model_config.validate_config(config, gpu_count=options.gpu_count)
    loaded.config = config
    loaded.config_json = model_config.config_to_json(config)
    loaded.signature = ModelSignature.from_config(config)
    if options.statistics is not None:
        loaded.statistics = ModelStatistics(
            config.name,
            loaded.version,
            decoupled=loaded.signature.decoupled,
            options=options.statistics,
            first_response_buckets_ms=_first_response_buckets(config),
        )
    for group in config.instance_group:
        devices = list(group.gpus) if group.kind == ModelInstanceGroup.KIND_GPU else [0]
        placements = [device for device in devices for _ in range(group.count)]
        for index, device in enumerate(placements):
            instance_name = f"{group.name}_{index}"
            instance_context = InstanceContext(
                model_name=config.name,
                version=loaded.version,
                model_dir=model_dir,
                name=instance_name,
                kind=_KIND_NAMES[group.kind],
                device_id=device,
                config=config,
                config_json=loaded.config_json,
            )
            instance: ModelInstance = backend.create_instance(loaded.backend_model, instance_context)
            if loaded.statistics is not None:  # inside the rate limiter: waiting for resources is queue time
                instance = InstrumentedInstance(instance, loaded.statistics)
                if group.kind == ModelInstanceGroup.KIND_GPU:
                    loaded.statistics.gpu_devices.add(device)
            if options.rate_limiter is not None and group.HasField("rate_limiter"):
                needs = _resource_needs(group.rate_limiter, device)
                instance = RateLimitedInstance(instance, options.rate_limiter, needs, config.name)
            loaded.instances.append((instance_name, instance))
    if not loaded.instances:
        raise NaiadError(
            f"model '{config.name}' has no instances to run: every instance_group has count 0",
            ErrorCode.INVALID_ARG,
        )
    loaded.scheduler = build_scheduler(
        config, loaded.instances, decoupled=loaded.signature.decoupled, model_dir=model_dir
    )
    before = set(threading.enumerate())
    loaded.scheduler.start()
    # The scheduler's worker threads log on behalf of this version (e.g. each batch at --log-verbose 1).
    names = [config.name, *(instance_name for instance_name, _ in loaded.instances)]
    bind_threads(
        (thread for thread in threading.enumerate() if thread not in before and any(n in thread.name for n in names)),
        config.name,
        loaded.version,
    )


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


def release_version(loaded: ModelVersion) -> None:
    """Stop the scheduler (finishing accepted requests), then finalize instances and model."""
    with model_context(loaded.name, loaded.version):
        _release(loaded)


def _release(loaded: ModelVersion) -> None:
    name = loaded.name
    if loaded.scheduler is not None:
        loaded.scheduler.stop()
        loaded.scheduler = None
        unbind_dead_threads()
    for instance_name, instance in loaded.instances:
        try:
            instance.finalize()
        except Exception:
            logger.exception("instance '%s' of model '%s' failed to finalize", instance_name, name)
    loaded.instances.clear()
    if loaded.backend_model is not None:
        try:
            loaded.backend_model.finalize()
        except Exception:
            logger.exception("model '%s' version %d failed to finalize", name, loaded.version)
        loaded.backend_model = None
