"""Tool calling against the tiny LLM with the real ``openai`` client: its chat template prints the
tools (Hermes style), and a forced ``tool_choice`` decodes the call under a JSON schema, so even a
random-weight model answers with a well-formed call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from naiad.testing import ServerProcess, start_server
from naiad_llm.testing import build_tiny_model, write_model_repository

MODEL = "tiny"
WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Oslo"]}, "unit": {"enum": ["C", "F"]}},
            "required": ["city", "unit"],
        },
    },
}
CLOCK: Any = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
MESSAGES: Any = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    # The tiny tokenizer spells the tools out in about 400 tokens: a longer context leaves room for calls.
    model = build_tiny_model(tmp_path_factory.mktemp("tiny-llama-long"), max_position_embeddings=2048)
    repository = tmp_path_factory.mktemp("llm-repository")
    write_model_repository(repository, MODEL, model)
    server: ServerProcess = start_server([repository], timeout=120)
    yield openai.OpenAI(base_url=f"http://{server.http_url}/v1", api_key="x", max_retries=0, timeout=60)
    server.stop()


def test_the_tools_reach_the_prompt(client: openai.OpenAI) -> None:
    plain = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    offered = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1, tools=[WEATHER])
    assert plain.usage is not None
    assert offered.usage is not None
    assert offered.usage.prompt_tokens > plain.usage.prompt_tokens + 20


def test_a_named_tool_choice_returns_that_call(client: openai.OpenAI) -> None:
    for seed in (1, 2):
        completion = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=[WEATHER, CLOCK],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            seed=seed,
        )
        message = completion.choices[0].message
        assert message.content is None
        assert message.tool_calls is not None
        [call] = message.tool_calls
        assert call.type == "function"
        assert call.function.name == "get_weather"
        arguments = json.loads(call.function.arguments)
        assert arguments["city"] in {"Paris", "Oslo"}
        assert arguments["unit"] in {"C", "F"}


def test_required_returns_calls_of_offered_functions_streamed(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=[WEATHER, CLOCK],
            tool_choice="required",
            seed=4,
            stream=True,
            max_tokens=600,
        )
    )
    calls = [call for chunk in chunks if chunk.choices for call in chunk.choices[0].delta.tool_calls or []]
    assert calls
    assert {call.function.name for call in calls if call.function} <= {"get_weather", "now"}
    assert [call.index for call in calls] == list(range(len(calls)))
    reasons = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason]
    assert reasons == ["tool_calls"]


def test_tool_choice_naming_a_function_not_offered_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="'clock', which 'tools' does not offer") as caught:
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "clock"}},
        )
    assert caught.value.param == "tool_choice"
