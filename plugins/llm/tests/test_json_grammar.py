"""JSON-schema guides over real tokenizers: the tiny model's byte-level BPE and a SentencePiece-style
vocabulary with byte fallback, both trained here. A guide must allow exactly the tokens that keep
the text a prefix of a document the schema accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer

from naiad.backend import NaiadError
from naiad_llm.engines.json_grammar import JsonGrammar, TokenGuide, token_bytes

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "color": {"enum": ["red", "green"]}},
    "required": ["ok", "color"],
}


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    return AutoTokenizer.from_pretrained(tiny_model)


def allowed(guide: TokenGuide, vocab_size: int) -> set[int]:
    scores = guide.mask(torch.zeros(vocab_size))
    return set(torch.nonzero(scores == 0).flatten().tolist())


def follow(guide: TokenGuide, token_ids: list[int], vocab_size: int) -> None:
    for token in token_ids:
        assert token in allowed(guide, vocab_size), f"token {token} refused"
        guide.advance(token)


def test_a_valid_document_is_allowed_token_by_token_then_only_the_end(tokenizer: Any) -> None:
    grammar = JsonGrammar(tokenizer, tokenizer.eos_token_id)
    guide = grammar.guide(SCHEMA)
    document = '{"ok": true, "color": "green"}'
    follow(guide, tokenizer.encode(document), len(tokenizer))
    assert allowed(guide, len(tokenizer)) == {tokenizer.eos_token_id}


def test_what_breaks_the_schema_is_masked(tokenizer: Any) -> None:
    guide = JsonGrammar(tokenizer, tokenizer.eos_token_id).guide(SCHEMA)
    follow(guide, tokenizer.encode('{"ok": true, "color": "'), len(tokenizer))
    next_tokens = allowed(guide, len(tokenizer))
    texts = {tokenizer.decode([token]) for token in next_tokens}
    assert texts
    assert all("red".startswith(text) or "green".startswith(text) for text in texts)
    assert tokenizer.eos_token_id not in next_tokens


def test_an_empty_schema_means_any_json_object(tokenizer: Any) -> None:
    guide = JsonGrammar(tokenizer, tokenizer.eos_token_id).guide({})
    first = {tokenizer.decode([token]) for token in allowed(guide, len(tokenizer))}
    assert first
    assert all(text.startswith("{") for text in first)
    follow(guide, tokenizer.encode('{"a": [1, 2.5, null], "b": {"c": "d"}}'), len(tokenizer))
    assert tokenizer.eos_token_id in allowed(guide, len(tokenizer))


def test_logits_beyond_the_vocabulary_are_masked(tokenizer: Any) -> None:
    guide = JsonGrammar(tokenizer, tokenizer.eos_token_id).guide(SCHEMA)
    padded = len(tokenizer) + 40  # models often pad their output layer past the tokenizer
    assert max(allowed(guide, padded)) < len(tokenizer)


def test_a_schema_that_cannot_be_compiled_is_an_invalid_arg(tokenizer: Any) -> None:
    grammar = JsonGrammar(tokenizer, tokenizer.eos_token_id)
    with pytest.raises(NaiadError, match=r"'json_schema' cannot be enforced: .*Unsupported type"):
        grammar.guide({"type": "spaceship"})


def test_a_sentencepiece_vocabulary_maps_spaces_and_byte_tokens(sentencepiece_tokenizer: Any) -> None:
    tokenizer = sentencepiece_tokenizer
    vocabulary = token_bytes(tokenizer, exclude={tokenizer.eos_token_id})
    ids = tokenizer.convert_tokens_to_ids
    assert vocabulary[b"\n"] == [ids("<0x0A>")]
    assert ids("\u2581the") in vocabulary[b" the"]
    guide = JsonGrammar(tokenizer, tokenizer.eos_token_id).guide(
        {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    follow(guide, tokenizer.encode('{"name": "ada"}'), len(tokenizer))
    assert tokenizer.eos_token_id in allowed(guide, len(tokenizer))
