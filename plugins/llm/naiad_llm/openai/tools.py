"""Tool calls in the Hermes / Qwen format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Chat templates of that family print the ``tools`` into the prompt and teach the model to answer a
call as a JSON object between those tags. The generated text is split here into content and
``tool_calls``; a block that is not a JSON call stays content.

A forced ``tool_choice`` (a named function, or "required") does not rely on the model: decoding
follows a JSON schema, as vLLM does it, and the reply is the call itself: the named function's
arguments, or a list of ``{"name": ..., "parameters": {...}}`` calls.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for; ``arguments`` is a JSON text, as OpenAI sends it."""

    name: str
    arguments: str
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")

    def body(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ToolUse:
    """The tools a chat request offers, and whether (and which) a call is forced."""

    tools: list[dict[str, Any]]
    forced: bool = False
    name: str | None = None  # the function a named tool_choice forces

    def schema(self) -> dict[str, Any]:
        """The JSON schema a forced call decodes under."""
        if self.name is not None:
            return next(_parameters(tool) for tool in self.tools if tool["function"]["name"] == self.name)
        calls = [
            {
                "type": "object",
                "properties": {"name": {"enum": [tool["function"]["name"]]}, "parameters": _parameters(tool)},
                "required": ["name", "parameters"],
            }
            for tool in self.tools
        ]
        return {"type": "array", "minItems": 1, "items": {"anyOf": calls}}

    def stream(self) -> ToolCallStream | ForcedCallStream:
        """A fresh splitter for one choice's reply."""
        return ForcedCallStream(self.name) if self.forced else ToolCallStream()


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    parameters = tool["function"].get("parameters")
    return parameters if isinstance(parameters, dict) and parameters else {"type": "object"}


def split_tool_calls(text: str, use: ToolUse) -> tuple[str | None, list[ToolCall]]:
    """The content left of ``text`` once its tool calls are taken out (None if only calls), and the calls."""
    stream = use.stream()
    pieces = [*stream.feed(text), *stream.flush()]
    calls = [piece for piece in pieces if isinstance(piece, ToolCall)]
    if not calls:
        return text, []
    content = "".join(piece for piece in pieces if isinstance(piece, str)).strip()
    return content or None, calls


class ToolCallStream:
    """Splits streamed text into content and tool calls, holding back text that may open a call."""

    def __init__(self) -> None:
        self._pending = ""
        self._in_call = False
        self.calls = 0

    def feed(self, text: str) -> list[str | ToolCall]:
        """What ``text`` (appended to what is held back) settles: content pieces and complete calls."""
        self._pending += text
        out: list[str | ToolCall] = []
        while True:
            if not self._in_call:
                start = self._pending.find(OPEN)
                if start < 0:
                    keep = _partial_open(self._pending)
                    self._emit_content(out, self._pending[: len(self._pending) - keep])
                    self._pending = self._pending[len(self._pending) - keep :]
                    return out
                self._emit_content(out, self._pending[:start])
                self._pending, self._in_call = self._pending[start:], True
            end = self._pending.find(CLOSE)
            if end < 0:
                return out
            block, self._pending = self._pending[: end + len(CLOSE)], self._pending[end + len(CLOSE) :]
            self._in_call = False
            self._emit_block(out, block, block[len(OPEN) : end])

    def flush(self) -> list[str | ToolCall]:
        """The rest, once generation ended (an unclosed call counts when its JSON is complete)."""
        out: list[str | ToolCall] = []
        if self._in_call:
            self._emit_block(out, self._pending, self._pending[len(OPEN) :])
        else:
            self._emit_content(out, self._pending)
        self._pending, self._in_call = "", False
        return out

    def _emit_block(self, out: list[str | ToolCall], block: str, body: str) -> None:
        call = _parse_call(body)
        if call is None:
            self._emit_content(out, block)
        else:
            self.calls += 1
            out.append(call)

    def _emit_content(self, out: list[str | ToolCall], text: str) -> None:
        if text and not (self.calls and text.isspace()):  # whitespace between calls is no content
            out.append(text)


def _parse_call(body: str) -> ToolCall | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("name"), str):
        return None
    arguments = document.get("arguments", {})
    return ToolCall(document["name"], arguments if isinstance(arguments, str) else json.dumps(arguments))


def _partial_open(text: str) -> int:
    """The length of the longest end of ``text`` that may be the start of ``<tool_call>``."""
    for size in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-size:]):
            return size
    return 0


class ForcedCallStream:
    """A reply decoded under a forced tool choice: held whole, then turned into its calls."""

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._text = ""
        self.calls = 0

    def feed(self, text: str) -> list[str | ToolCall]:
        """Nothing settles before the reply is complete."""
        self._text += text
        return []

    def flush(self) -> list[str | ToolCall]:
        """The calls (the text itself when it is not a complete call, as when cut by ``max_tokens``)."""
        calls = _forced_calls(self._text, self._name)
        self.calls = len(calls)
        text, self._text = self._text, ""
        if calls:
            return list(calls)
        return [text] if text else []


def _forced_calls(text: str, name: str | None) -> list[ToolCall]:
    try:
        document = json.loads(text)
    except ValueError:
        return []
    if name is not None:
        return [ToolCall(name, json.dumps(document))]
    if not isinstance(document, list):
        return []
    return [
        ToolCall(call["name"], json.dumps(call.get("parameters", {})))
        for call in document
        if isinstance(call, dict) and isinstance(call.get("name"), str)
    ]
