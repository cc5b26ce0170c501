"""The OpenAI-compatible routes, for a backend module's ``naiad_http_routes`` hook."""

from __future__ import annotations

from functools import partial

from starlette.routing import BaseRoute, Route

from naiad.backend import ServerHandle
from naiad_llm.openai.chat import chat_completions
from naiad_llm.openai.completions import completions
from naiad_llm.openai.models import ModelList
from naiad_llm.openai.target import Targets
from naiad_llm.openai.transport import endpoint


def openai_routes(server: ServerHandle) -> list[BaseRoute]:
    """``/v1/chat/completions``, ``/v1/completions``, ``/v1/models`` and ``/v1/models/{model}``."""
    targets = Targets(server)
    models = ModelList(targets)
    return [
        Route("/v1/chat/completions", endpoint(partial(chat_completions, targets, server)), methods=["POST"]),
        Route("/v1/completions", endpoint(partial(completions, targets, server)), methods=["POST"]),
        Route("/v1/models", endpoint(models.list), methods=["GET"]),
        Route("/v1/models/{model}", endpoint(models.retrieve), methods=["GET"]),
    ]
