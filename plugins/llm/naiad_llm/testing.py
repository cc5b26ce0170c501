"""A tiny random-weight Llama-style model and its model repository, built on the spot, no download.

``build_tiny_model(folder)`` writes a normal Hugging Face model folder (``config.json``,
``model.safetensors``, tokenizer files with a chat template, ``generation_config.json``): 2 layers,
hidden size 64, a byte-level BPE tokenizer trained on a small built-in corpus. Everything is seeded,
so the same seed gives the same files and the same text. The model speaks nonsense; it exists to
exercise the server. ``write_model_repository(repository, name, model)`` adds a naiad model folder
that serves it with the ``llm`` backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CORPUS = (
    "The quick brown fox jumps over the lazy dog.",
    "A naiad is a nymph of fresh water: springs, rivers, fountains and lakes.",
    "The server streams tokens to its clients as soon as the model produces them.",
    "Continuous batching adds new requests to the running batch between decoding steps.",
    "Hello! How are you today? I am fine, thank you for asking.",
    "Rivers run to the sea, and the sea returns to the clouds as rain.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 100 1000.",
    "user assistant system: answer the question in one short sentence, please.",
    "Once upon a time there was a small model that knew only a few words.",
    "Water, stone, light and wind; the spring sings under the old oak tree.",
)
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")
# Plain turns; with tools, a Hermes-style system turn listing them, and calls as <tool_call> blocks.
CHAT_TEMPLATE = (
    "{% if tools %}<s>system: You may call these functions. Answer a call as "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>\n<tools>'
    "{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools></s>\n{% endif %}"
    "{% for message in messages %}<s>{{ message['role'] }}: "
    "{% for call in message.get('tool_calls') or [] %}<tool_call>"
    "{{ {'name': call['function']['name'], 'arguments': call['function']['arguments']} | tojson }}</tool_call>"
    "{% endfor %}{{ message['content'] or '' }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)


def build_tiny_model(folder: Path, *, seed: int = 0, vocab_size: int = 384, max_position_embeddings: int = 512) -> Path:
    """Write the tiny model into ``folder`` (created); returns it."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(vocab_size)
    tokenizer.save_pretrained(folder)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<pad>"],
        tie_word_embeddings=True,
    )
    generator = torch.random.fork_rng(devices=[])
    with generator:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(  # type: ignore[no-untyped-call]
        bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"]
    )
    model.save_pretrained(folder)
    return folder


def _train_tokenizer(vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        chat_template=CHAT_TEMPLATE,
    )


def model_repository_config(*, backend: str = "llm", kind: str = "KIND_CPU") -> str:
    """The smallest ``config.pbtxt`` for an LLM model: auto-complete fills in the rest."""
    return f'backend: "{backend}"\ninstance_group [ {{ count: 1 kind: {kind} }} ]\n'


def write_model_repository(
    repository: Path, name: str, model: Path | str, *, engine: str = "transformers", **engine_args: Any
) -> Path:
    """Write ``<repository>/<name>/config.pbtxt`` and ``1/model.json`` serving ``model`` (a folder or hub id)."""
    model_dir = repository / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(model_repository_config())
    document = {"engine": engine, "model": str(model), **engine_args}
    (model_dir / "1" / "model.json").write_text(json.dumps(document, indent=2) + "\n")
    return model_dir
