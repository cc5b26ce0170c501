"""A loaded LLM model version: its engine, started once the config is final."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from naiad.backend import BackendModel, ModelConfig, ModelInstanceGroup, NaiadError, ServerHandle, gpu_count
from naiad_llm.engine import Engine, EngineInfo
from naiad_llm.engines import create_engine
from naiad_llm.metrics import ModelMetrics
from naiad_llm.repository import ModelSpec

logger = logging.getLogger(__name__)
START_TIMEOUT_S = 1800.0
STOP_TIMEOUT_S = 120.0


def device_for(config: ModelConfig) -> str:
    """The engine's device from the instance groups: ``cuda:<first gpu>`` for KIND_GPU, else the CPU,
    or the first GPU for KIND_MODEL when there is one."""
    if not config.instance_group:
        return "cpu"
    group = config.instance_group[0]
    kind_name = ModelInstanceGroup.Kind.Name(group.kind)
    if kind_name == "KIND_GPU":
        return f"cuda:{group.gpus[0] if group.gpus else 0}"
    if kind_name == "KIND_MODEL" and gpu_count() > 0:
        return "cuda:0"
    return "cpu"


class LLMModel(BackendModel):
    """One model version; ``engine`` and ``info`` are what the frontends use (``info.tokenizer``)."""

    def __init__(self, name: str, version: int, spec: ModelSpec, server: ServerHandle) -> None:
        self.name = name
        self.version = version
        self.spec = spec
        self.server = server
        self.engine: Engine = create_engine(spec.engine, spec.settings)
        self.info = EngineInfo(model=spec.settings.model, max_model_len=0)
        self.metrics: ModelMetrics | None = None

    def configured(self, config: ModelConfig) -> None:
        """Start the engine on the device the final instance groups name."""
        device = device_for(config)
        if device != self.spec.settings.device:
            settings = dataclasses.replace(self.spec.settings, device=device)
            self.spec = ModelSpec(self.spec.engine, settings)
            self.engine = create_engine(self.spec.engine, settings)
        future = asyncio.run_coroutine_threadsafe(self.engine.start(), self.server.loop)
        try:
            self.info = future.result(START_TIMEOUT_S)
        except NaiadError:
            raise
        except Exception as error:
            raise NaiadError(f"model '{self.name}': the {self.spec.engine} engine failed to start: {error}") from error
        self.metrics = ModelMetrics(self.server, self.name, self.version, self.info.max_model_len)
        logger.info("model '%s' version %d: %s engine ready on %s", self.name, self.version, self.spec.engine, device)

    def finalize(self) -> None:
        """Stop the engine and drop the version's metric series."""
        if self.metrics is not None:
            self.metrics.close()
        if self.server.loop.is_closed():
            return
        future = asyncio.run_coroutine_threadsafe(self.engine.stop(), self.server.loop)
        try:
            future.result(STOP_TIMEOUT_S)
        except Exception:
            logger.exception("model '%s': stopping the %s engine failed", self.name, self.spec.engine)
