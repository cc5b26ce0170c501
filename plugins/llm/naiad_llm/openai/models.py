"""``GET /v1/models`` and ``GET /v1/models/{model}``: the READY models that speak text."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from naiad_llm.openai.errors import OpenAIError
from naiad_llm.openai.target import Targets


class ModelList:
    """Lists the models the API can serve; ``created`` is when the API started (naiad keeps no other date)."""

    def __init__(self, targets: Targets) -> None:
        self.targets = targets
        self.created = int(time.time())

    async def list(self, request: Request) -> Response:
        names = []
        for name in sorted(self.targets.server.model_names()):
            try:
                self.targets.serving(name)
            except OpenAIError:
                continue
            names.append(name)
        return JSONResponse({"object": "list", "data": [self._card(name) for name in names]})

    async def retrieve(self, request: Request) -> Response:
        name = request.path_params["model"]
        self.targets.serving(name)
        return JSONResponse(self._card(name))

    def _card(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": "naiad"}
