"""Backend ``llm``: ``model.json`` names the engine (transformers, vLLM or TensorRT-LLM)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from naiad.backend import (
    BackendInfo,
    BackendModel,
    InstanceContext,
    ModelInstance,
    ModelLoadContext,
    Scheduler,
    SchedulerContext,
    ServerHandle,
    hookimpl,
)
from naiad_llm import hooks

BACKEND = "llm"


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


@hookimpl
def naiad_http_routes(server: ServerHandle) -> list[BaseRoute]:
    from naiad_llm.openai.routes import openai_routes  # the OpenAI-compatible API, served once for both backends

    return openai_routes(server)
