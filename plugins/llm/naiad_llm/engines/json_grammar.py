"""JSON-schema constrained decoding for the transformers engine, on outlines-core.

outlines-core compiles a schema to a regular expression, and that expression to an index over the
model's vocabulary: for every state, the tokens that keep the output a prefix of a document the schema
accepts (and the end-of-sequence token once the document is complete). A :class:`TokenGuide` follows
one request through that index and masks the logits of every other token before sampling.

Compiling is the slow part (seconds for a large vocabulary and schema), so compiled indexes are kept
per schema and :meth:`JsonGrammar.guide` is meant to run off the event loop.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
from outlines_core import Guide, Index, Vocabulary
from outlines_core.json_schema import build_regex_from_schema

from naiad.backend import invalid_arg

ANY_OBJECT: Mapping[str, Any] = {"type": "object"}  # what ``{}`` (OpenAI's ``json_object``) asks for
CACHED_SCHEMAS = 64
_BITS = torch.arange(32, dtype=torch.int32)


class TokenGuide:
    """One request's position in a compiled schema: which tokens may come next."""

    __slots__ = ("_eos", "_guide", "_words")

    def __init__(self, index: Index, eos_token_id: int) -> None:
        self._guide = Guide(index)
        self._eos = eos_token_id
        self._words = torch.empty(0, dtype=torch.int32)

    def mask(self, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` (one row of logits) with every token the schema forbids next set to -inf."""
        words = (scores.numel() + 31) // 32
        if self._words.numel() != words:
            self._words = torch.empty(words, dtype=torch.int32)
        self._guide.write_mask_into(self._words.data_ptr(), words, 4)
        allowed = ((self._words.unsqueeze(-1) >> _BITS) & 1).view(-1)[: scores.numel()].bool()
        return scores.masked_fill(~allowed.to(scores.device), float("-inf"))

    def advance(self, token: int) -> None:
        """Move past the drawn ``token`` (the end of sequence ends the document: nothing to move)."""
        if token != self._eos:
            self._guide.advance(token, return_tokens=False)


class JsonGrammar:
    """Compiles JSON schemas against one tokenizer's vocabulary (thread-safe, cached per schema)."""

    def __init__(self, tokenizer: Any, eos_token_id: int) -> None:
        self._tokenizer = tokenizer
        self._eos = eos_token_id
        self._vocabulary: Vocabulary | None = None
        self._indexes: OrderedDict[str, Index] = OrderedDict()
        self._lock = threading.Lock()

    def guide(self, schema: Mapping[str, Any]) -> TokenGuide:
        """A fresh guide for ``schema`` (``{}``: any JSON object); INVALID_ARG when it cannot compile."""
        key = json.dumps(schema or ANY_OBJECT)  # property order matters: the output follows it
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
                return TokenGuide(index, self._eos)
        try:
            regex = build_regex_from_schema(key)
        except (ValueError, TypeError) as error:
            raise invalid_arg(f"sampling parameter 'json_schema' cannot be enforced: {error}") from None
        index = Index(regex, self._vocabulary_once())
        with self._lock:
            self._indexes[key] = index
            while len(self._indexes) > CACHED_SCHEMAS:
                self._indexes.popitem(last=False)
        return TokenGuide(index, self._eos)

    def _vocabulary_once(self) -> Vocabulary:
        with self._lock:
            if self._vocabulary is None:
                self._vocabulary = Vocabulary(self._eos, token_bytes(self._tokenizer, exclude={self._eos}))
            return self._vocabulary


def token_bytes(tokenizer: Any, *, exclude: set[int]) -> dict[bytes, list[int]]:
    """The bytes each ordinary token stands for -> its ids (special tokens and ``exclude`` left out).

    Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen) spell bytes as printable characters;
    SentencePiece vocabularies (Llama 2, Mistral) spell spaces as "▁" and raw bytes as ``<0xNN>``.
    """
    skip = set(exclude) | set(getattr(tokenizer, "all_special_ids", ()))
    byte_level = _is_byte_level(tokenizer)
    table = _printable_to_byte() if byte_level else {}
    vocabulary: dict[bytes, list[int]] = {}
    for token, token_id in tokenizer.get_vocab().items():
        if token_id in skip:
            continue
        if byte_level and all(char in table for char in token):
            data = bytes(table[char] for char in token)
        elif len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            data = bytes([int(token[3:5], 16)])
        else:
            data = token.replace("\u2581", " ").encode("utf-8")
        if data:
            vocabulary.setdefault(data, []).append(token_id)
    return vocabulary


def _is_byte_level(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    parts = decoder.get("decoders", [decoder]) if decoder.get("type") == "Sequence" else [decoder]
    return any(part.get("type") == "ByteLevel" for part in parts)


def _printable_to_byte() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the printable character that stands for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {chr(byte): byte for byte in printable}
    shifted = 256
    for byte in range(256):
        if byte not in printable:
            table[chr(shifted)] = byte
            shifted += 1
    return table
