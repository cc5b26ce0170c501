"""What the GPU engines give back, as naiad's outputs: text deltas, finish reasons, log-probabilities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from naiad_llm.stops import StopMatcher

_FINISH_REASONS = {
    "stop": "stop",  # both engines: end of sequence, a stop string or a stop token
    "length": "length",  # both: max_tokens or the context
    "abort": "abort",  # vLLM: aborted
    "cancelled": "abort",  # TensorRT-LLM: aborted
    "timeout": "abort",  # TensorRT-LLM: the request's own time limit
}


def finish_reason(reason: object) -> str:
    """naiad's finish reason for an engine's; an engine that failed the request (vLLM's "error") raises."""
    mapped = _FINISH_REASONS.get(str(reason))
    if mapped is None:
        raise RuntimeError(f"the engine ended the request with finish reason {reason!r}")
    return mapped


class TextStream:
    """Deltas of an engine's cumulative text, cut at the first stop string.

    TensorRT-LLM matches stop strings as token sequences, so it misses one the model spells with
    other tokens, and it may already have streamed the start of one it trims at the end; this
    matches them on the text instead, as vLLM does, and holds back what may begin one.
    """

    __slots__ = ("_matcher", "_seen")

    def __init__(self, stops: Sequence[str]) -> None:
        self._matcher = StopMatcher(stops)
        self._seen = 0  # characters of the cumulative text fed to the matcher

    @property
    def stopped(self) -> bool:
        """A stop string was found: the request is complete, whatever the engine says."""
        return self._matcher.stopped

    def update(self, text: str, finished: bool) -> str:
        """The text to send for the engine's cumulative ``text``; ``finished`` releases what was held."""
        delta = self._matcher.feed(text[self._seen :])
        start = self._seen - len(text)  # > 0 when the engine trimmed its final text
        self._seen = max(self._seen, len(text))
        if finished:
            held = self._matcher.flush()
            delta += held[: max(0, len(held) - max(0, start))]
        return delta


def logprob_dicts(entries: Sequence[Any] | None, token_ids: Sequence[int]) -> list[dict[int, float]] | None:
    """Per token, token id -> log-probability, from the engines' per-token entries.

    An entry is a mapping of token id to an object with ``logprob`` (both engines' ``Logprob``), or
    a bare float, the chosen token's log-probability (older TensorRT-LLM releases).
    """
    if entries is None:
        return None
    converted: list[dict[int, float]] = []
    for entry, token in zip(entries, token_ids, strict=False):
        if isinstance(entry, Mapping):
            converted.append({int(key): _logprob(value) for key, value in entry.items()})
        else:
            converted.append({int(token): float(entry)})
    return converted


def _logprob(value: Any) -> float:
    return float(value.logprob if hasattr(value, "logprob") else value)
