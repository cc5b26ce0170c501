"""Log-probabilities from the ``logprobs`` output, in the chat and the completions shapes.

The output holds, per generated token, a JSON object mapping token ids to a log-probability (or to
``{"logprob", "rank", "decoded_token"}`` as Triton's vLLM backend writes it); its first entry is the
token that was generated, the others are the most likely alternatives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_FLOOR = -9999.0  # what an impossible token (-inf, not JSON) reports, as OpenAI's API does


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token, its log-probability and the ``top`` alternatives (most likely first)."""

    token: str
    logprob: float
    top: list[tuple[str, float]]


def read_positions(positions: Sequence[Any], tokenizer: Any, top: int) -> list[TokenLogprob]:
    """The generated tokens of ``positions`` with at most ``top`` alternatives each."""
    tokens = []
    for position in positions:
        if not isinstance(position, Mapping) or not position:
            continue
        entries = [(_token(key, value, tokenizer), _logprob(value)) for key, value in position.items()]
        ranked = sorted(entries, key=lambda entry: -entry[1])[:top]
        tokens.append(TokenLogprob(entries[0][0], entries[0][1], ranked))
    return tokens


def chat_logprobs(tokens: Sequence[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's ``logprobs`` object."""
    return {
        "content": [
            {
                **_chat_entry(token.token, token.logprob),
                "top_logprobs": [_chat_entry(text, logprob) for text, logprob in token.top],
            }
            for token in tokens
        ],
        "refusal": None,
    }


def completion_logprobs(tokens: Sequence[TokenLogprob], offset: int) -> dict[str, Any]:
    """A completion choice's ``logprobs`` object; ``offset``: where its first token starts in the text."""
    offsets = []
    for token in tokens:
        offsets.append(offset)
        offset += len(token.token)
    return {
        "tokens": [token.token for token in tokens],
        "token_logprobs": [token.logprob for token in tokens],
        "top_logprobs": [dict(token.top) for token in tokens],
        "text_offset": offsets,
    }


def _chat_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def _token(key: str, value: Any, tokenizer: Any) -> str:
    decoded = value.get("decoded_token") if isinstance(value, Mapping) else None
    if isinstance(decoded, str):
        return decoded
    if tokenizer is not None and key.lstrip("-").isdigit():
        return str(tokenizer.decode([int(key)]))
    return f"token_id:{key}"


def _logprob(value: Any) -> float:
    number = value.get("logprob") if isinstance(value, Mapping) else value
    return max(float(number), _FLOOR) if isinstance(number, int | float) else _FLOOR
