"""The hooks both backend names (``llm`` and ``vllm``, :mod:`naiad_llm.backends`) delegate to."""

from __future__ import annotations

from naiad.backend import (
    BackendInfo,
    BackendModel,
    InstanceContext,
    ModelInstance,
    ModelLoadContext,
    NaiadError,
    Scheduler,
    SchedulerContext,
)
from naiad_llm.autocomplete import complete_config
from naiad_llm.metrics import close_families
from naiad_llm.model import LLMModel
from naiad_llm.repository import read_model_spec
from naiad_llm.scheduler import LLMScheduler


def backend_info(backend: str) -> BackendInfo:
    """No model file of its own: a config names the backend (``model.json`` is Triton's vLLM layout)."""
    return BackendInfo(backend)


def load_model(backend: str, context: ModelLoadContext) -> LLMModel:
    """Read the version's engine settings, check the engine is installed and complete the config."""
    if context.server is None:
        raise NaiadError(f"model '{context.model_name}': an LLM model needs a running server")
    if context.auto_complete:
        complete_config(context.config)
    if not context.config.model_transaction_policy.decoupled:
        raise NaiadError(
            f"model '{context.model_name}': backend \"{backend}\" streams tokens and needs "
            "model_transaction_policy { decoupled: true } (auto-complete sets it)"
        )
    spec = read_model_spec(backend, context.model_name, context.version_dir, "cpu")
    return LLMModel(context.model_name, context.version, spec, context.server)


def create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance:
    """Instances only stand for the config's groups: the scheduler drives the model's one engine."""
    return ModelInstance()


def create_scheduler(model: BackendModel, context: SchedulerContext) -> Scheduler | None:
    if not isinstance(model, LLMModel):
        return None
    assert model.metrics is not None, "the engine starts before the scheduler is made"
    return LLMScheduler(context, model.engine, model.info, model.metrics)


def finalize() -> None:
    close_families()
