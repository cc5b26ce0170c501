"""The model a request names, and what the frontend knows of it: inputs, tokenizer, context length.

Models of naiad-llm carry an :class:`~naiad_llm.engine.EngineInfo`. Any other model that speaks
Triton's vLLM-backend tensors (a python-backend model, say) may name a Hugging Face tokenizer (a
folder or hub id) and its context length in its config parameters ``tokenizer`` and
``max_model_len``; without a tokenizer it serves completions but not chat.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from naiad.backend import ErrorCode, NaiadError, ServerHandle, ServingModel
from naiad_llm.engine import JSON_SCHEMA, EngineInfo
from naiad_llm.openai.errors import OpenAIError, from_naiad

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"


@dataclass(frozen=True, slots=True)
class Target:
    """One READY model version a request runs on."""

    name: str
    serving: ServingModel
    tokenizer: Any  # a Hugging Face tokenizer, or None
    max_model_len: int | None
    enforces_json_schema: bool

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.serving.signature.inputs)

    @property
    def batched(self) -> bool:
        return self.serving.signature.max_batch_size > 0


def speaks_text(serving: ServingModel) -> bool:
    """Whether the model takes ``text_input`` and answers ``text_output``, both BYTES."""
    text_input = serving.signature.inputs.get(TEXT_INPUT)
    text_output = serving.signature.outputs.get(TEXT_OUTPUT)
    return bool(text_input and text_output and text_input.datatype.wire == text_output.datatype.wire == "BYTES")


class Targets:
    """Resolves model names for the API, loading (once per version) the tokenizers configs name."""

    def __init__(self, server: ServerHandle) -> None:
        self.server = server
        self._tokenizers: dict[tuple[str, int, str], Any] = {}

    def serving(self, name: str) -> ServingModel:
        """The READY version serving ``name``; 404 when there is none that speaks text."""
        try:
            serving = self.server.resolve(name)
        except NaiadError as error:
            if error.code is ErrorCode.NOT_FOUND:
                raise _no_such_model(name) from None
            raise from_naiad(error) from None
        if not speaks_text(serving):
            raise _no_such_model(name)
        return serving

    async def resolve(self, name: object) -> Target:
        """The target of a request's ``model`` field."""
        if not isinstance(name, str) or not name:
            raise OpenAIError("'model' must name a model", 400, param="model")
        serving = self.serving(name)
        info = getattr(serving.backend_model, "info", None)
        if isinstance(info, EngineInfo):
            enforces = info.extra.get(JSON_SCHEMA) is True
            return Target(name, serving, info.tokenizer, info.max_model_len, enforces)
        parameters = serving.config.parameters
        length = parameters["max_model_len"].string_value if "max_model_len" in parameters else ""
        source = parameters["tokenizer"].string_value if "tokenizer" in parameters else ""
        tokenizer = await self._tokenizer(serving, source) if source else None
        return Target(name, serving, tokenizer, int(length) if length.isdigit() else None, False)

    async def _tokenizer(self, serving: ServingModel, source: str) -> Any:
        key = (serving.name, serving.version, source)
        if key not in self._tokenizers:
            try:
                self._tokenizers[key] = await asyncio.to_thread(_load_tokenizer, source)
            except Exception as error:
                raise OpenAIError(
                    f"model '{serving.name}' names the tokenizer '{source}', which failed to load: {error}", 500
                ) from None
        return self._tokenizers[key]


def _load_tokenizer(source: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)


def _no_such_model(name: str) -> OpenAIError:
    return OpenAIError(f"The model `{name}` does not exist.", 404, param="model", code="model_not_found")
