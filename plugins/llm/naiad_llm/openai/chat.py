"""``POST /v1/chat/completions``: messages through the chat template, the reply as content or tool calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from naiad.backend import ServerHandle
from naiad_llm.openai.errors import invalid
from naiad_llm.openai.generation import Choice, Generation, Step
from naiad_llm.openai.logprobs import chat_logprobs, read_positions
from naiad_llm.openai.prompts import count_tokens, render_chat
from naiad_llm.openai.responses import Envelope, finish_reason, output_tokens, usage
from naiad_llm.openai.sampling import fit_max_tokens, json_schema, sampling_parameters, stream_settings
from naiad_llm.openai.target import Target, Targets
from naiad_llm.openai.tools import ForcedCallStream, ToolCall, ToolCallStream, ToolUse, split_tool_calls
from naiad_llm.openai.transport import event_stream, flag, read_json, until_disconnected


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A chat request, validated and rendered."""

    target: Target
    prompt: str
    prompt_tokens: int | None
    parameters: dict[str, Any]
    tools: ToolUse | None  # tool calls are parsed out of the reply
    top_logprobs: int | None  # None: no log-probabilities
    stream: bool
    include_usage: bool


async def parse_chat(targets: Targets, body: dict[str, Any]) -> ChatRequest:
    """Validate a chat request and render its prompt."""
    target = await targets.resolve(body.get("model"))
    tools = _tools(body)
    prompt = render_chat(target, body.get("messages"), tools.tools if tools is not None else None)
    parameters = sampling_parameters(body, "max_completion_tokens", "max_tokens")
    schema = json_schema(body, target)
    if tools is not None and tools.forced:
        schema = _forced_call_schema(tools, schema, target)
    if schema is not None:
        parameters["json_schema"] = schema
    top_logprobs = _top_logprobs(body)
    if top_logprobs is not None:
        parameters["logprobs"] = top_logprobs
    prompt_tokens = count_tokens(target, prompt)
    fit_max_tokens(parameters, prompt_tokens, target, "messages")
    stream, include_usage = stream_settings(body)
    return ChatRequest(target, prompt, prompt_tokens, parameters, tools, top_logprobs, stream, include_usage)


async def chat_completions(targets: Targets, server: ServerHandle, request: Request) -> Response:
    body = await read_json(request)
    chat = await parse_chat(targets, body)
    envelope = Envelope.new("chatcmpl", "chat.completion", str(body["model"]))
    generation = Generation(
        server, chat.target, chat.prompt, chat.parameters, stream=chat.stream, logprobs=chat.top_logprobs is not None
    )
    try:
        if chat.stream:  # the first response comes before the stream starts: a model's error gets its status
            first = await until_disconnected(request, generation.next_step())
            return event_stream(_ChatStream(chat, generation, envelope).chunks(first), generation.cancel)
        choices, input_tokens = await until_disconnected(request, generation.collect())
    except BaseException:
        generation.cancel()
        raise
    prompt_tokens = input_tokens if input_tokens is not None else chat.prompt_tokens or 0
    answer = envelope.wrap(
        [_choice(chat, index, choice) for index, choice in enumerate(choices)],
        usage=usage(prompt_tokens, output_tokens(chat.target, choices)),
    )
    return JSONResponse(answer)


def _choice(chat: ChatRequest, index: int, choice: Choice) -> dict[str, Any]:
    content, calls = split_tool_calls(choice.text, chat.tools) if chat.tools else (choice.text, [])
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = [call.body() for call in calls]
    reason = finish_reason(choice.finish_reason)
    return {
        "index": index,
        "message": message,
        "logprobs": _logprobs(chat, choice.logprobs),
        "finish_reason": "tool_calls" if calls and reason == "stop" else reason,
    }


def _logprobs(chat: ChatRequest, positions: list[Any] | None) -> dict[str, Any] | None:
    if chat.top_logprobs is None or positions is None:
        return None
    return chat_logprobs(read_positions(positions, chat.target.tokenizer, chat.top_logprobs))


class _ChatStream:
    """The chunks of a streamed chat completion, one choice's progress at a time."""

    def __init__(self, chat: ChatRequest, generation: Generation, envelope: Envelope) -> None:
        self.chat = chat
        self.generation = generation
        self.envelope = Envelope(envelope.id, "chat.completion.chunk", envelope.model, envelope.created)
        self.choices: list[Choice] = []
        self.splitters: dict[int, ToolCallStream | ForcedCallStream] = {}
        self.calls_sent: dict[int, int] = {}  # per choice: tool calls streamed so far
        self.finished: set[int] = set()
        self.prompt_tokens = chat.prompt_tokens

    async def chunks(self, step: Step | None) -> AsyncIterator[dict[str, Any]]:
        """Every chunk, from the first response's ``step`` on."""
        for index in range(self.chat.parameters["n"]):
            yield self._chunk(index, {"role": "assistant", "content": ""})
        while step is not None:
            if step.input_tokens is not None:
                self.prompt_tokens = step.input_tokens
            for delta in step.deltas:
                self.choices.extend(Choice() for _ in range(delta.index + 1 - len(self.choices)))
                self.choices[delta.index].add(delta)
                for chunk in self._delta_chunks(delta.index, delta.text, delta.logprobs, delta.finish_reason):
                    yield chunk
            step = await self.generation.next_step()
        for index in range(max(len(self.choices), self.chat.parameters["n"])):
            if index not in self.finished:  # the model reports no finish reason
                for chunk in self._delta_chunks(index, "", None, "stop"):
                    yield chunk
        if self.chat.include_usage:
            tokens = usage(self.prompt_tokens or 0, output_tokens(self.chat.target, self.choices))
            yield self.envelope.wrap([], usage=tokens)

    def _delta_chunks(
        self, index: int, text: str, positions: list[Any] | None, reason: str | None
    ) -> list[dict[str, Any]]:
        pieces: list[str | ToolCall] = [text] if text else []
        if self.chat.tools:
            if index not in self.splitters:
                self.splitters[index] = self.chat.tools.stream()
            splitter = self.splitters[index]
            pieces = splitter.feed(text) + (splitter.flush() if reason else [])
        deltas = [self._piece(index, piece) for piece in pieces]
        logprobs = _logprobs(self.chat, positions) if positions else None
        if logprobs is not None and not deltas:
            deltas.append({"content": ""})
        chunks = [self._chunk(index, delta, logprobs if number == 0 else None) for number, delta in enumerate(deltas)]
        if reason:
            self.finished.add(index)
            calls = self.splitters[index].calls if index in self.splitters else 0
            reason = finish_reason(reason)
            chunks.append(self._chunk(index, {}, None, "tool_calls" if calls and reason == "stop" else reason))
        return chunks

    def _piece(self, index: int, piece: str | ToolCall) -> dict[str, Any]:
        if isinstance(piece, str):
            return {"content": piece}
        position = self.calls_sent.get(index, 0)
        self.calls_sent[index] = position + 1
        return {"tool_calls": [{"index": position, **piece.body()}]}

    def _chunk(
        self, index: int, delta: dict[str, Any], logprobs: dict[str, Any] | None = None, reason: str | None = None
    ) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": reason}
        extra = {"usage": None} if self.chat.include_usage else {}
        return self.envelope.wrap([choice], **extra)


def _tools(body: dict[str, Any]) -> ToolUse | None:
    """The tools to offer the model, and the call ``tool_choice`` forces; None when there are none or
    ``tool_choice`` is "none"."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if not tools:
        if choice not in (None, "none", "auto"):
            raise invalid("'tool_choice' names a tool, but the request offers no 'tools'", "tool_choice")
        return None
    if not isinstance(tools, list) or not all(_is_function(tool) for tool in tools):
        raise invalid('\'tools\' must be a list of {"type": "function", "function": {"name": ...}}', "tools")
    if choice == "none":
        return None
    if choice in (None, "auto"):
        return ToolUse(list(tools))
    if choice == "required":
        return ToolUse(list(tools), forced=True)
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(name, str):
        raise invalid(
            "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": "
            '{"name": ...}}',
            "tool_choice",
        )
    if name not in {tool["function"]["name"] for tool in tools}:
        raise invalid(f"'tool_choice' names the function '{name}', which 'tools' does not offer", "tool_choice")
    return ToolUse(list(tools), forced=True, name=name)


def _forced_call_schema(tools: ToolUse, response_format: dict[str, Any] | None, target: Target) -> dict[str, Any]:
    if response_format is not None:
        raise invalid("a forced 'tool_choice' and 'response_format' cannot be combined", "tool_choice")
    if not target.enforces_json_schema:
        raise invalid(
            f"model '{target.name}' cannot force a tool call: its engine does not constrain decoding to a JSON "
            "schema; use 'tool_choice': 'auto'",
            "tool_choice",
        )
    return tools.schema()


def _is_function(tool: object) -> bool:
    function = tool.get("function") if isinstance(tool, dict) else None
    return (
        isinstance(tool, dict)
        and tool.get("type") == "function"
        and isinstance(function, dict)
        and (isinstance(function.get("name"), str))
    )


def _top_logprobs(body: dict[str, Any]) -> int | None:
    top = body.get("top_logprobs")
    if not flag(body, "logprobs"):
        if top is not None:
            raise invalid("'top_logprobs' needs 'logprobs': true", "top_logprobs")
        return None
    if top is None:
        return 0
    if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= 20:
        raise invalid("'top_logprobs' must be an integer between 0 and 20", "top_logprobs")
    return top
