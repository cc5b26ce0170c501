"""Schedulers: how queued requests of one model version reach its instances."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from naiad.backend import ModelInstance
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling.base import Scheduler
from naiad.scheduling.direct import DirectScheduler
from naiad.scheduling.dynamic import DynamicScheduler, rules_from_config
from naiad.scheduling.execution import execute_batch
from naiad.scheduling.sequence import SequenceScheduler

__all__ = [
    "DirectScheduler",
    "DynamicScheduler",
    "Scheduler",
    "SequenceScheduler",
    "build_scheduler",
    "execute_batch",
]


def build_scheduler(
    config: ModelConfig,
    instances: Sequence[tuple[str, ModelInstance]],
    *,
    decoupled: bool,
    model_dir: Path | None = None,
) -> Scheduler:
    """The scheduler a config asks for: the sequence batcher, the dynamic batcher, or one request at a time.

    ``model_dir`` is where ``sequence_batching.state`` initial-state ``data_file`` files are read from.
    """
    if config.HasField("sequence_batching"):
        return SequenceScheduler(config, instances, decoupled=decoupled, model_dir=model_dir)
    if config.HasField("dynamic_batching"):
        return DynamicScheduler(
            config.name,
            instances,
            rules_from_config(config),
            decoupled=decoupled,
            preserve_ordering=config.dynamic_batching.preserve_ordering,
        )
    return DirectScheduler(config.name, instances, decoupled=decoupled)
