"""The two backend names this package serves, as plugin objects over the shared hooks.

``llm``: ``model.json`` names the engine (transformers, vLLM or TensorRT-LLM). ``vllm``: Triton
vLLM-backend repositories unchanged (``model.json`` is vLLM's engine arguments). pluggy registers a
plugin object once, so each name gets an object of its own; ``llm`` also serves the OpenAI API.
"""

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


class LLMBackend:
    """The hooks of one backend name."""

    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def naiad_backend_info(self) -> BackendInfo:
        return hooks.backend_info(self.name)

    @hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        return hooks.load_model(self.name, context)

    @hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        return hooks.create_instance(model, context)

    @hookimpl
    def naiad_create_scheduler(self, model: BackendModel, context: SchedulerContext) -> Scheduler | None:
        return hooks.create_scheduler(model, context)

    @hookimpl
    def naiad_backend_finalize(self) -> None:
        hooks.finalize()


class LLMBackendWithOpenAI(LLMBackend):
    """The ``llm`` backend, which also serves the OpenAI-compatible API (once, for both names)."""

    @hookimpl
    def naiad_http_routes(self, server: ServerHandle) -> list[BaseRoute]:
        from naiad_llm.openai.routes import openai_routes  # imported only when the server asks for routes

        return openai_routes(server)


llm = LLMBackendWithOpenAI("llm")
vllm = LLMBackend("vllm")
