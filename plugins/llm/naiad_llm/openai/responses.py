"""Pieces every endpoint's answers share: ids, finish reasons, usage, token counts."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from naiad_llm.openai.generation import Choice
from naiad_llm.openai.prompts import count_tokens
from naiad_llm.openai.target import Target

_FINISH_REASONS = ("stop", "length")


@dataclass(frozen=True, slots=True)
class Envelope:
    """The fields every response and chunk of one request carries."""

    id: str
    object: str
    model: str
    created: int

    @classmethod
    def new(cls, prefix: str, kind: str, model: str) -> Envelope:
        return cls(f"{prefix}-{uuid.uuid4().hex}", kind, model, int(time.time()))

    def wrap(self, choices: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
            **fields,
        }


def finish_reason(reason: str | None) -> str:
    """OpenAI's name for a model's finish reason ("abort" and unknown ones end as "stop")."""
    return reason if reason in _FINISH_REASONS else "stop"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def output_tokens(target: Target, choices: Sequence[Choice]) -> int:
    """The tokens generated for ``choices``: as the model counted them, else as the tokenizer does."""
    return sum(
        choice.output_tokens
        if choice.output_tokens is not None
        else count_tokens(target, choice.text, special=False) or 0
        for choice in choices
    )
