"""The OpenAI-compatible API with the real ``openai`` client, against the tiny random-weight Llama model
served by the ``llm`` backend (transformers engine): its chat template, tokenizer and context length."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from naiad.testing import ServerProcess, start_server
from naiad_llm.testing import write_model_repository

MODEL = "tiny"
CONTEXT = 96
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Hello! How are you?"},
]
EXACT = {"ignore_eos": True}  # the random model may end any time; these tests want exact lengths


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository = tmp_path_factory.mktemp("llm-repository")
    write_model_repository(repository, MODEL, tiny_model, max_model_len=CONTEXT)
    process = start_server([repository], timeout=120)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{server.http_url}/v1", api_key="x", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def prompt_tokens(tiny_model: Path) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    prompt = str(tokenizer.apply_chat_template(cast(Any, MESSAGES), add_generation_prompt=True, tokenize=False))
    assert prompt.endswith("<s>assistant: ")
    return len(tokenizer.encode(prompt))


def chat(client: openai.OpenAI, **fields: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=MESSAGES, **fields)


def test_the_model_is_listed(client: openai.OpenAI) -> None:
    assert [model.id for model in client.models.list().data] == [MODEL]


def test_chat_counts_tokens_with_the_models_tokenizer(client: openai.OpenAI, prompt_tokens: int) -> None:
    completion = chat(client, max_tokens=6, extra_body=EXACT)
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason == "length"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (prompt_tokens, 6)


def test_max_tokens_defaults_to_the_rest_of_the_context(client: openai.OpenAI, prompt_tokens: int) -> None:
    completion = chat(client, extra_body=EXACT)
    assert completion.usage is not None
    assert completion.usage.completion_tokens == CONTEXT - prompt_tokens
    assert completion.choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError, match=f"maximum context length is {CONTEXT} tokens"):
        chat(client, max_tokens=CONTEXT)


def test_a_seeded_chat_streams_the_same_text(client: openai.OpenAI) -> None:
    fields: dict[str, Any] = {"max_tokens": 8, "temperature": 1.0, "seed": 11, "extra_body": EXACT}
    whole = chat(client, **fields).choices[0].message.content
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True}, **fields))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == whole
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "length"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 8


def test_completion_with_logprobs_streamed(client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="The quick brown fox",
            max_tokens=5,
            logprobs=2,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=EXACT,
        )
    )
    logprobs = [chunk.choices[0].logprobs for chunk in chunks if chunk.choices and chunk.choices[0].logprobs]
    tokens = [token for item in logprobs for token in item.tokens or []]
    text = "".join(chunk.choices[0].text for chunk in chunks if chunk.choices)
    assert len(tokens) == 5
    joined = "".join(tokens)
    if "\ufffd" not in joined:  # byte-level tokens that split a character decode apart differently
        assert joined == text
    assert text
    tops = [top for item in logprobs for top in item.top_logprobs or []]
    assert all(1 <= len(top) <= 2 and all(value <= 0 for value in top.values()) for top in tops)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 5


def test_response_format_json_schema_is_followed(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}},
        "required": ["answer", "sure"],
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}}
    for seed in (1, 2):
        completion = chat(client, response_format=response_format, seed=seed)
        value = json.loads(completion.choices[0].message.content)
        assert value["answer"] in {"yes", "no"}
        assert isinstance(value["sure"], bool)
        assert completion.choices[0].finish_reason == "stop"


def test_response_format_json_object_starts_an_object_and_streams(client: openai.OpenAI) -> None:
    chunks = list(chat(client, response_format={"type": "json_object"}, max_tokens=8, stream=True, seed=3))
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text.startswith("{")


def test_a_schema_the_grammar_cannot_compile_is_a_400(client: openai.OpenAI) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "spaceship"}}}
    with pytest.raises(openai.BadRequestError, match="cannot be enforced"):
        chat(client, response_format=response_format)


def test_n_gives_that_many_choices(client: openai.OpenAI) -> None:
    completion = chat(client, n=3, max_tokens=3, temperature=1.0, seed=5, extra_body=EXACT)
    assert [choice.index for choice in completion.choices] == [0, 1, 2]
    assert len({choice.message.content for choice in completion.choices}) > 1
    assert completion.usage.completion_tokens == 9
    chunks = list(chat(client, n=2, max_tokens=2, stream=True, extra_body=EXACT))
    finished = [choice.index for chunk in chunks for choice in chunk.choices if choice.finish_reason]
    assert sorted(finished) == [0, 1]


@pytest.mark.parametrize("stream", [False, True])
def test_an_empty_prompt_is_a_400_and_the_model_keeps_serving(client: openai.OpenAI, stream: bool) -> None:
    with pytest.raises(openai.BadRequestError, match="the prompt is empty"):
        client.completions.create(model=MODEL, prompt="", max_tokens=2, stream=stream)
    assert client.completions.create(model=MODEL, prompt="the river", max_tokens=2).choices[0].text is not None
