"""Schedulers: how queued requests of one model version reach its instances."""

from __future__ import annotations

from collections.abc import Sequence

from naiad.backend import ModelInstance
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling.base import Scheduler
from naiad.scheduling.direct import DirectScheduler
from naiad.scheduling.dynamic import DynamicScheduler, rules_from_config
from naiad.scheduling.execution import execute_batch

__all__ = ["DirectScheduler", "DynamicScheduler", "Scheduler", "build_scheduler", "execute_batch"]


def build_scheduler(
    config: ModelConfig, instances: Sequence[tuple[str, ModelInstance]], *, decoupled: bool
) -> Scheduler:
    """The scheduler a config asks for: the dynamic batcher, or one request at a time."""
    if config.HasField("dynamic_batching"):
        return DynamicScheduler(
            config.name,
            instances,
            rules_from_config(config),
            decoupled=decoupled,
            preserve_ordering=config.dynamic_batching.preserve_ordering,
        )
    return DirectScheduler(config.name, instances, decoupled=decoupled)
