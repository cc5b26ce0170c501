"""Hermes-style tool calls split out of generated text, whole and streamed at any boundary."""

from __future__ import annotations

import json

import pytest

from naiad_llm.openai.tools import ToolCall, ToolCallStream, ToolUse, split_tool_calls

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
AUTO = ToolUse([])  # tools offered, no call forced: the Hermes format is parsed
TEXT = f"Let me check. {CALL}\n{CALL.replace('Paris', 'Oslo')}"


def streamed(text: str, size: int) -> list[str | ToolCall]:
    stream = ToolCallStream()
    pieces: list[str | ToolCall] = []
    for start in range(0, len(text), size):
        pieces += stream.feed(text[start : start + size])
    return pieces + stream.flush()


def test_calls_are_split_from_the_content() -> None:
    content, calls = split_tool_calls(TEXT, AUTO)
    assert content == "Let me check."
    assert [(call.name, json.loads(call.arguments)) for call in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Oslo"}),
    ]
    assert len({call.id for call in calls}) == 2
    assert calls[0].body()["type"] == "function"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 11, 1000])
def test_streamed_at_any_boundary_gives_the_same_calls(size: int) -> None:
    pieces = streamed(TEXT, size)
    assert "".join(piece for piece in pieces if isinstance(piece, str)) == "Let me check. "
    assert [piece.arguments for piece in pieces if isinstance(piece, ToolCall)] == [
        '{"city": "Paris"}',
        '{"city": "Oslo"}',
    ]


@pytest.mark.parametrize(
    "text",
    [
        "no calls at all < tool_call >",
        "<tool_call>not json</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        "a <tool_call",
    ],
)
def test_what_is_not_a_call_stays_content(text: str) -> None:
    assert split_tool_calls(text, AUTO) == (text, [])
    assert "".join(piece for piece in streamed(text, 2) if isinstance(piece, str)) == text


def test_an_unclosed_call_at_the_end_counts_when_its_json_is_complete() -> None:
    content, calls = split_tool_calls('<tool_call>{"name": "now", "arguments": "{}"}', AUTO)
    assert content is None
    assert [(call.name, call.arguments) for call in calls] == [("now", "{}")]


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CLOCK = {"type": "function", "function": {"name": "now"}}


def test_a_named_tool_choice_decodes_its_arguments_and_becomes_the_call() -> None:
    use = ToolUse([WEATHER, CLOCK], forced=True, name="get_weather")
    assert use.schema() == WEATHER["function"]["parameters"]  # type: ignore[index]
    content, calls = split_tool_calls('{"city": "Paris"}', use)
    assert content is None
    assert [(call.name, json.loads(call.arguments)) for call in calls] == [("get_weather", {"city": "Paris"})]


def test_required_decodes_a_list_of_calls_of_any_offered_function() -> None:
    use = ToolUse([WEATHER, CLOCK], forced=True)
    schema = use.schema()
    assert schema["type"] == "array"
    assert [option["properties"]["name"] for option in schema["items"]["anyOf"]] == [
        {"enum": ["get_weather"]},
        {"enum": ["now"]},
    ]
    assert schema["items"]["anyOf"][1]["properties"]["parameters"] == {"type": "object"}
    reply = '[{"name": "now", "parameters": {}}, {"name": "get_weather", "parameters": {"city": "Oslo"}}]'
    _, calls = split_tool_calls(reply, use)
    assert [call.name for call in calls] == ["now", "get_weather"]
    assert json.loads(calls[1].arguments) == {"city": "Oslo"}


def test_a_forced_reply_cut_short_stays_content() -> None:
    stream = ToolUse([WEATHER], forced=True, name="get_weather").stream()
    assert stream.feed('{"city": "Pa') == []
    assert stream.flush() == ['{"city": "Pa']
    assert stream.calls == 0
