"""Incremental detokenization: the text a growing token list adds, decoding only a short window.

Decoding the whole output at every step costs time in its length; instead, as vLLM does, each step
decodes the tokens from ``prefix`` on, and the text they add past what ``prefix:read`` decoded to
is the delta (both decodes start at the same token, so a tokenizer's handling of the first token,
such as SentencePiece dropping a leading space, cancels out). While the window's text ends inside a
character (U+FFFD), nothing is emitted and the window grows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

REPLACEMENT = "\ufffd"


class IncrementalDecoder:
    """The text deltas of one request's output tokens (special tokens skipped)."""

    __slots__ = ("_decode", "_prefix", "_read")

    def __init__(self, tokenizer: Any) -> None:
        self._decode = _decoder(tokenizer)
        self._prefix = 0
        self._read = 0

    def delta(self, tokens: Sequence[int], *, final: bool = False) -> str:
        """The text ``tokens`` (the whole output so far) add since the last delta; ``final`` emits even
        an incomplete character."""
        before = self._decode(tokens[self._prefix : self._read])
        text = self._decode(tokens[self._prefix :])
        if len(text) <= len(before) or (text.endswith(REPLACEMENT) and not final):
            return ""
        self._prefix, self._read = self._read, len(tokens)
        return text[len(before) :]


def _decoder(tokenizer: Any) -> Callable[[Sequence[int]], str]:
    """The fastest decode that gives the tokenizer's own text: its Rust backend when nothing is
    post-processed in Python (no clean-up of tokenization spaces), else ``tokenizer.decode``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and not getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return lambda ids: str(backend.decode(list(ids), skip_special_tokens=True))
    return lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=True))
