"""Incremental detokenization gives exactly the text of decoding the whole output, on the tiny
model's byte-level tokenizer and a SentencePiece-style one, including characters split over tokens."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from naiad_llm.engines.detokenizer import IncrementalDecoder

TEXTS = ("The quick brown fox: 12 rivers", "naïve café — 鼬 and 🙂 in a line", '{"name": "ada", "age": 36}\n')


@pytest.fixture(scope="module")
def byte_level(tiny_model: Path) -> Any:
    return AutoTokenizer.from_pretrained(tiny_model)


def deltas(tokenizer: Any, tokens: list[int]) -> list[str]:
    decoder = IncrementalDecoder(tokenizer)
    pieces = [decoder.delta(tokens[: end + 1]) for end in range(len(tokens))]
    return [*pieces, decoder.delta(tokens, final=True)]


@pytest.mark.parametrize("name", ["byte_level", "sentencepiece_tokenizer"])
def test_the_deltas_join_to_the_whole_decode(name: str, request: pytest.FixtureRequest) -> None:
    tokenizer = request.getfixturevalue(name)
    for text in TEXTS:
        tokens = tokenizer.encode(text, add_special_tokens=False)
        pieces = deltas(tokenizer, tokens)
        assert "".join(pieces) == tokenizer.decode(tokens, skip_special_tokens=True)
        assert not any(piece.endswith("\ufffd") for piece in pieces)


def test_random_token_runs_match_too(byte_level: Any) -> None:
    generator = random.Random(0)
    for _ in range(50):
        tokens = [generator.randrange(len(byte_level)) for _ in range(generator.randrange(1, 40))]
        assert "".join(deltas(byte_level, tokens)) == byte_level.decode(tokens, skip_special_tokens=True)


def test_a_character_split_over_tokens_waits_for_its_last_byte(byte_level: Any) -> None:
    tokens = byte_level.encode("鼬", add_special_tokens=False)
    assert len(tokens) > 1  # the tiny vocabulary spells it in bytes
    decoder = IncrementalDecoder(byte_level)
    assert [decoder.delta(tokens[: end + 1]) for end in range(len(tokens))] == [""] * (len(tokens) - 1) + ["鼬"]
