"""Backend ``vllm``: Triton vLLM-backend repositories unchanged (``model.json`` is vLLM's engine arguments)."""

from __future__ import annotations

from naiad.backend import (
    BackendInfo,
    BackendModel,
    InstanceContext,
    ModelInstance,
    ModelLoadContext,
    Scheduler,
    SchedulerContext,
    hookimpl,
)
from naiad_llm import hooks

BACKEND = "vllm"


@hookimpl
def naiad_backend_info() -> BackendInfo:
    return hooks.backend_info(BACKEND)


@hookimpl
def naiad_load_model(context: ModelLoadContext) -> BackendModel:
    return hooks.load_model(BACKEND, context)


@hookimpl
def naiad_create_instance(model: BackendModel, context: InstanceContext) -> ModelInstance:
    return hooks.create_instance(model, context)


@hookimpl
def naiad_create_scheduler(model: BackendModel, context: SchedulerContext) -> Scheduler | None:
    return hooks.create_scheduler(model, context)


@hookimpl
def naiad_backend_finalize() -> None:
    hooks.finalize()
