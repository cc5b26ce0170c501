"""Shared fixtures: the tiny model, built once per test session, and a SentencePiece-style tokenizer
(no download)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from naiad_llm.testing import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def sentencepiece_tokenizer() -> Any:
    """A BPE tokenizer spelled as SentencePiece ones are (Llama 2, Mistral): spaces as "\u2581",
    bytes outside the vocabulary as ``<0xNN>`` tokens."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    backend.normalizer = normalizers.Replace(" ", "\u2581")
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never")
    backend.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    byte_tokens = [f"<0x{byte:02X}>" for byte in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "</s>", *byte_tokens])
    backend.train_from_iterator(['{"name": "ada", "age": 36}'] * 20 + ["the cat sat on the mat"] * 20, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>")  # type: ignore[no-untyped-call]
